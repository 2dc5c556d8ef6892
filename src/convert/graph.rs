//! The dependency graph of the model calls of one trace (or session), for
//! the `after` and `delay` fields: a call waits for every call of its group
//! that ended before it started and that no other such call already waits
//! for (the frontier). Sequential turns become a chain, calls started
//! together after one call fan out from it, and a call started after
//! several overlapping calls ended joins them.
//!
//! Written once over plain (id, group, start, end) so that every source can
//! share it.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap};

/// One call: its group (trace or session) and its times, on one clock.
#[derive(Clone, Copy, Debug)]
pub struct Node<'a> {
    pub group: &'a str,
    pub start_ns: i64,
    pub end_ns: i64,
}

/// What a call waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deps {
    /// Indices of the calls it waits for, the one that ended last first
    /// (ties: the earlier index first).
    pub after: Vec<usize>,
    /// From the end of the first of them to this call's start.
    pub gap_ns: i64,
}

/// The dependencies of each node (None for a call that waits for nothing).
/// A call that ended exactly when another started counts as ended before it.
pub fn derive(nodes: &[Node]) -> Vec<Option<Deps>> {
    let mut order: Vec<usize> = (0..nodes.len()).collect();
    order.sort_by_key(|&i| (nodes[i].start_ns, i));
    let mut groups: HashMap<&str, Frontier<usize>> = HashMap::new();
    let mut out: Vec<Option<Deps>> = vec![None; nodes.len()];
    for i in order {
        let n = nodes[i];
        let mut after = Vec::new();
        let gap =
            groups
                .entry(n.group)
                .or_default()
                .start(n.start_ns, n.end_ns, i as u64, i, |&p| after.push(p));
        out[i] = gap.map(|gap_ns| Deps { after, gap_ns });
    }
    out
}

/// The calls of one group, given in start order, one at a time: what
/// each waits for is found as they come, so a writer can stream them.
///
/// The calls ended by each start only grow, so the frontier is kept as
/// it goes: a call that ends joins it and takes out what it waited for.
/// About n log n, plus the size of the frontiers. Only calls still running
/// or in the frontier are held.
pub struct Frontier<T> {
    /// Started calls not yet ended, by end (then order).
    running: BinaryHeap<Reverse<(i64, u64)>>,
    /// Ended calls nothing ended waits for, the last ended first.
    ended: BTreeSet<(Reverse<i64>, u64)>,
    /// The calls running or in the frontier, by order.
    calls: HashMap<u64, Call<T>>,
}

struct Call<T> {
    end_ns: i64,
    after: Vec<u64>,
    value: T,
}

impl<T> Default for Frontier<T> {
    fn default() -> Self {
        Frontier {
            running: BinaryHeap::new(),
            ended: BTreeSet::new(),
            calls: HashMap::new(),
        }
    }
}

impl<T> Frontier<T> {
    /// The next call of the group (starts never decrease; `order` breaks
    /// ties and grows with each call): `each` is given the values of the
    /// calls it waits for, the one that ended last first (ties: the lower
    /// order first), and the gap from that end to its start is returned
    /// (None: it waits for nothing).
    pub fn start(
        &mut self,
        start_ns: i64,
        end_ns: i64,
        order: u64,
        value: T,
        mut each: impl FnMut(&T),
    ) -> Option<i64> {
        while let Some(&Reverse((end, p))) = self.running.peek() {
            if end > start_ns {
                break;
            }
            self.running.pop();
            let waited = std::mem::take(&mut self.calls.get_mut(&p).expect("running").after);
            for a in waited {
                // Waited for by a call that ended: no longer in the frontier.
                if let Some(c) = self.calls.remove(&a) {
                    self.ended.remove(&(Reverse(c.end_ns), a));
                }
            }
            self.ended.insert((Reverse(end), p));
        }
        let gap = self
            .ended
            .first()
            .map(|&(Reverse(last), _)| start_ns - last);
        let after: Vec<u64> = self.ended.iter().map(|&(_, p)| p).collect();
        for p in &after {
            each(&self.calls[p].value);
        }
        self.running.push(Reverse((end_ns, order)));
        self.calls.insert(
            order,
            Call {
                end_ns,
                after,
                value,
            },
        );
        gap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    fn node(group: &str, start_ms: i64, end_ms: i64) -> Node<'_> {
        Node {
            group,
            start_ns: start_ms * MS,
            end_ns: end_ms * MS,
        }
    }

    /// Calls of one group, by their start and end, ms.
    fn calls(spans: &[(i64, i64)]) -> Vec<Node<'static>> {
        spans.iter().map(|&(s, e)| node("t", s, e)).collect()
    }

    fn deps(after: &[usize], gap_ms: i64) -> Option<Deps> {
        Some(Deps {
            after: after.to_vec(),
            gap_ns: gap_ms * MS,
        })
    }

    #[test]
    fn sequential_turns_chain() {
        let n = calls(&[(0, 100), (150, 300), (310, 400)]);
        assert_eq!(derive(&n), vec![None, deps(&[0], 50), deps(&[1], 10)]);
    }

    #[test]
    fn calls_after_one_call_fan_out() {
        let n = calls(&[(0, 100), (120, 200), (130, 250)]);
        assert_eq!(derive(&n), vec![None, deps(&[0], 20), deps(&[0], 30)]);
    }

    #[test]
    fn a_call_after_parallel_calls_joins_them_last_ended_first() {
        let n = calls(&[(0, 100), (120, 300), (130, 250), (320, 400)]);
        assert_eq!(
            derive(&n),
            vec![None, deps(&[0], 20), deps(&[0], 30), deps(&[1, 2], 20)]
        );
    }

    #[test]
    fn overlapping_calls_wait_for_nothing_of_each_other() {
        let n = calls(&[(0, 100), (50, 150), (99, 200)]);
        assert_eq!(derive(&n), vec![None, None, None]);
    }

    #[test]
    fn equal_end_and_start_is_ended_and_equal_ends_keep_input_order() {
        let n = calls(&[(0, 100), (10, 100), (100, 120)]);
        assert_eq!(derive(&n), vec![None, None, deps(&[0, 1], 0)]);
    }

    #[test]
    fn groups_do_not_mix_and_input_order_does_not_matter() {
        let n = [
            node("b", 200, 300),
            node("a", 0, 100),
            node("b", 0, 50),
            node("a", 150, 160),
        ];
        assert_eq!(
            derive(&n),
            vec![deps(&[2], 150), None, None, deps(&[1], 50)]
        );
    }

    #[test]
    fn a_call_still_running_is_not_waited_for_but_one_ended_earlier_is() {
        // 1 runs over 2's start; 2 waits for 0 only, 3 joins 1 and 2.
        let n = calls(&[(0, 10), (5, 100), (20, 30), (100, 110)]);
        assert_eq!(
            derive(&n),
            vec![None, None, deps(&[0], 10), deps(&[1, 2], 0)]
        );
    }

    /// The rule as written, quadratic: the frontier of the calls ended.
    fn by_definition(nodes: &[Node]) -> Vec<Option<Deps>> {
        let mut out: Vec<Option<Deps>> = vec![None; nodes.len()];
        let mut order: Vec<usize> = (0..nodes.len()).collect();
        order.sort_by_key(|&i| (nodes[i].start_ns, i));
        for (k, &c) in order.iter().enumerate() {
            let n = nodes[c];
            let ended: Vec<usize> = order[..k]
                .iter()
                .copied()
                .filter(|&p| nodes[p].group == n.group && nodes[p].end_ns <= n.start_ns)
                .collect();
            let mut frontier: Vec<usize> = ended
                .iter()
                .copied()
                .filter(|&p| {
                    !ended
                        .iter()
                        .any(|&q| out[q].as_ref().is_some_and(|d| d.after.contains(&p)))
                })
                .collect();
            frontier.sort_by_key(|&p| (std::cmp::Reverse(nodes[p].end_ns), p));
            if let Some(&first) = frontier.first() {
                out[c] = Some(Deps {
                    gap_ns: n.start_ns - nodes[first].end_ns,
                    after: frontier,
                });
            }
        }
        out
    }

    #[test]
    fn agrees_with_the_rule_as_written_on_many_small_traces() {
        // A fixed pseudo-random sequence (xorshift), coarse times for ties.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % m) as i64
        };
        let groups = ["a", "b", "c"];
        for _ in 0..200 {
            let nodes: Vec<Node> = (0..12)
                .map(|_| {
                    let start = next(20);
                    Node {
                        group: groups[next(3) as usize],
                        start_ns: start,
                        end_ns: start + next(6),
                    }
                })
                .collect();
            assert_eq!(derive(&nodes), by_definition(&nodes), "{nodes:?}");
        }
    }
}
