//! The batch model driven by the wall clock, for the served simulator:
//! one task owns the [`Batch`], hands arriving requests to it at their
//! arrival time and wakes at each step's end to deliver the step's
//! tokens. Steps follow one another on the model's own times (a late
//! wakeup delays a delivery, never the next step), so service times are
//! what the profile says.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::time::{Duration, Instant};

use super::batch::{Batch, Event, Job};
use super::profile::Profile;

/// A handle on the running model.
pub struct Driver {
    tx: UnboundedSender<(Job, UnboundedSender<Event>)>,
    /// Requests waiting for a slot, for /metrics.
    pub waiting: Arc<AtomicUsize>,
}

impl Driver {
    /// Start the model on the current runtime.
    pub fn start(profile: Profile) -> Driver {
        let (tx, rx) = unbounded_channel();
        let waiting = Arc::new(AtomicUsize::new(0));
        tokio::spawn(drive(Batch::new(profile), rx, waiting.clone()));
        Driver { tx, waiting }
    }

    /// A request arrives now; its events come on the receiver.
    pub fn submit(&self, job: Job) -> UnboundedReceiver<Event> {
        let (tx, rx) = unbounded_channel();
        let _ = self.tx.send((job, tx));
        rx
    }
}

async fn drive(
    mut batch: Batch,
    mut arrivals: UnboundedReceiver<(Job, UnboundedSender<Event>)>,
    waiting: Arc<AtomicUsize>,
) {
    let origin = Instant::now();
    let now = || origin.elapsed().as_secs_f64() * 1000.0;
    let mut listeners: HashMap<u64, UnboundedSender<Event>> = HashMap::new();
    let mut events = Vec::new();
    loop {
        let wake = batch
            .next_end()
            .map(|end| origin + Duration::from_secs_f64(end.max(0.0) / 1000.0));
        tokio::select! {
            arrival = arrivals.recv() => {
                let Some((job, tx)) = arrival else { return };
                let t = now();
                events.clear();
                batch.advance(t, &mut events);
                deliver(&events, &mut listeners);
                listeners.insert(job.key, tx);
                batch.arrive(t, job);
            }
            _ = sleep_until(wake), if wake.is_some() => {
                events.clear();
                batch.advance(now(), &mut events);
                deliver(&events, &mut listeners);
            }
        }
        waiting.store(batch.waiting(), Ordering::Relaxed);
    }
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

/// Each event to its request; a client gone away does not stop the
/// model, as it does not stop a server's step.
fn deliver(events: &[Event], listeners: &mut HashMap<u64, UnboundedSender<Event>>) {
    for ev in events {
        if let Some(tx) = listeners.get(&ev.key) {
            let _ = tx.send(*ev);
        }
        if ev.done {
            listeners.remove(&ev.key);
        }
    }
}
