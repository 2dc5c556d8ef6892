//! Keys only known at run time: percentiles, HTTP statuses, turn
//! positions, SLOs, server figures.

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

/// The JSON key of a percentile: `p50`, `p99.9`.
pub fn percentile_key(p: f64) -> String {
    format!("p{}", crate::text::format_ms(p))
}

/// Entries whose keys are only known at run time (percentiles, HTTP
/// statuses, turn positions, SLOs), serialized as a JSON object in the order
/// inserted. A key inserted again keeps its place and takes the new value,
/// as a JSON object does (`--percentiles 50,50`).
#[derive(Clone, Debug, PartialEq)]
pub struct Keyed<V>(pub Vec<(String, V)>);

impl<V> Default for Keyed<V> {
    fn default() -> Self {
        Keyed(Vec::new())
    }
}

impl<V> Keyed<V> {
    /// Add `key`, or replace its value where it is.
    pub fn insert(&mut self, key: String, value: V) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = value,
            None => self.0.push((key, value)),
        }
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&V> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The entries in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<V> FromIterator<(String, V)> for Keyed<V> {
    fn from_iter<I: IntoIterator<Item = (String, V)>>(iter: I) -> Self {
        let mut k = Keyed::default();
        for (key, value) in iter {
            k.insert(key, value);
        }
        k
    }
}

impl<V: Serialize> Serialize for Keyed<V> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}
