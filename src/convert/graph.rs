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
use std::collections::{BTreeSet, BinaryHeap, HashMap, HashSet};

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
///
/// Calls are taken in start order; the calls ended by each start only grow,
/// so the frontier is kept as it goes: a call that ends joins it and takes
/// out what it waited for. About n log n, plus the size of the frontiers.
pub fn derive(nodes: &[Node]) -> Vec<Option<Deps>> {
    let mut groups: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        groups.entry(n.group).or_default().push(i);
    }
    let mut out: Vec<Option<Deps>> = vec![None; nodes.len()];
    for members in groups.values() {
        // By start, then input order: every call a call can wait for comes
        // before it.
        let mut order = members.clone();
        order.sort_by_key(|&i| (nodes[i].start_ns, i));
        // Started calls not yet ended, by end (then input order).
        let mut running: BinaryHeap<Reverse<(i64, usize)>> = BinaryHeap::new();
        let mut frontier: BTreeSet<(Reverse<i64>, usize)> = BTreeSet::new();
        let mut covered: HashSet<usize> = HashSet::new();
        for &c in &order {
            let start = nodes[c].start_ns;
            while let Some(&Reverse((end, p))) = running.peek() {
                if end > start {
                    break;
                }
                running.pop();
                if let Some(d) = &out[p] {
                    for &a in &d.after {
                        covered.insert(a);
                        frontier.remove(&(Reverse(nodes[a].end_ns), a));
                    }
                }
                if !covered.contains(&p) {
                    frontier.insert((Reverse(end), p));
                }
            }
            if let Some(&(Reverse(last), _)) = frontier.first() {
                out[c] = Some(Deps {
                    after: frontier.iter().map(|&(_, p)| p).collect(),
                    gap_ns: start - last,
                });
            }
            running.push(Reverse((nodes[c].end_ns, c)));
        }
    }
    out
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
