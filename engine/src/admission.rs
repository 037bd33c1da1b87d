//! Fleet admission: which proof's job enters the shared work queue next. Proofs take turns
//! (round-robin), one job per turn, and only while the queue is shallow: jobs wait here, where
//! the turn order is fair, not in the FIFO work queue, where a huge proof's backlog would sit
//! ahead of a small proof's first job. Each proof's own `--jobs` cap is applied by the engine
//! before it asks for a turn. Pure data: the coordinator (`assay_coordinator::admitter`) feeds it the queue's depth, read from the
//! server now and then, and each freed worker slot in between, from which it keeps an estimate.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

/// Round-robin admission over proofs keyed by `K`, each with waiting requests `W`.
#[derive(Debug)]
pub struct Admission<K, W> {
    /// Proofs with at least one waiting request, in turn order.
    turns: VecDeque<K>,
    waiting: HashMap<K, VecDeque<W>>,
    /// Jobs allowed in the queue beyond the workers' idle slots.
    lookahead: usize,
    /// Jobs admitted since the queue's depth was last read, or still undelivered then.
    queued: usize,
    /// Worker slots waiting for a job when the depth was last read.
    idle_slots: usize,
}

impl<K: Clone + Eq + Hash, W> Admission<K, W> {
    /// No proof waiting; `lookahead` jobs may queue beyond the workers' idle slots.
    pub fn new(lookahead: usize) -> Self {
        Self {
            turns: VecDeque::new(),
            waiting: HashMap::new(),
            lookahead,
            queued: 0,
            idle_slots: 0,
        }
    }

    /// `proof` asks for one more job to enter the queue.
    pub fn request(&mut self, proof: K, waiter: W) {
        let queue = self.waiting.entry(proof.clone()).or_default();
        if queue.is_empty() {
            self.turns.push_back(proof);
        }
        queue.push_back(waiter);
    }

    /// Forgets a finished or cancelled proof and returns its waiting requests.
    pub fn remove(&mut self, proof: &K) -> Vec<W> {
        self.turns.retain(|k| k != proof);
        self.waiting
            .remove(proof)
            .map(Vec::from)
            .unwrap_or_default()
    }

    /// The queue as the server last reported it: jobs not yet delivered to a worker, and
    /// worker slots waiting for one.
    pub fn observe(&mut self, undelivered: usize, idle_slots: usize) {
        self.queued = undelivered;
        self.idle_slots = idle_slots;
    }

    /// A worker slot finished a job (its result came back): the slot takes a queued job if
    /// there is one, or waits idle. Keeps the estimate current between reads of the server.
    pub fn slot_freed(&mut self) {
        if self.queued > 0 {
            self.queued -= 1;
        } else {
            self.idle_slots += 1;
        }
    }

    /// A request granted earlier was never used (its proof went away): give the room back.
    pub fn unused(&mut self) {
        self.slot_freed();
    }

    /// Whether any proof still has a request waiting for its turn.
    pub fn has_waiting(&self) -> bool {
        !self.turns.is_empty()
    }

    /// The next request to admit, if the queue has room: the proof whose turn it is gives one
    /// request and, if it has more, goes to the back of the line.
    pub fn grant(&mut self) -> Option<(K, W)> {
        if self.idle_slots == 0 && self.queued >= self.lookahead {
            return None;
        }
        let proof = self.turns.pop_front()?;
        let queue = self.waiting.get_mut(&proof)?;
        let waiter = queue.pop_front()?;
        if queue.is_empty() {
            self.waiting.remove(&proof);
        } else {
            self.turns.push_back(proof.clone());
        }
        // An idle slot takes the job at once; otherwise it waits in the queue.
        if self.idle_slots > 0 {
            self.idle_slots -= 1;
        } else {
            self.queued += 1;
        }
        Some((proof, waiter))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(admission: &mut Admission<&'static str, u32>) -> Vec<(&'static str, u32)> {
        std::iter::from_fn(|| admission.grant()).collect()
    }

    #[test]
    fn proofs_take_turns_whatever_order_they_asked_in() {
        let mut admission = Admission::new(6);
        for n in 0..4 {
            admission.request("mutation-run", n);
        }
        admission.request("hotfix", 0);
        admission.request("hotfix", 1);
        assert_eq!(
            drain(&mut admission),
            [
                ("mutation-run", 0),
                ("hotfix", 0),
                ("mutation-run", 1),
                ("hotfix", 1),
                ("mutation-run", 2),
                ("mutation-run", 3),
            ]
        );
    }

    #[test]
    fn a_late_proof_gets_a_turn_within_one_round_once_the_queue_has_room() {
        let mut admission = Admission::new(2);
        for n in 0..10 {
            admission.request("mutation-run", n);
        }
        assert_eq!(drain(&mut admission).len(), 2, "lookahead caps the queue");
        admission.request("hotfix", 0);
        assert_eq!(admission.grant(), None, "a full queue admits nobody");
        // Both queued jobs were delivered to workers: two places open, one per proof.
        admission.observe(0, 0);
        assert_eq!(drain(&mut admission), [("mutation-run", 2), ("hotfix", 0)]);
    }

    #[test]
    fn idle_worker_slots_widen_the_queue() {
        let mut admission = Admission::new(1);
        for n in 0..10 {
            admission.request("suite", n);
        }
        admission.observe(0, 4);
        assert_eq!(drain(&mut admission).len(), 5);
    }

    #[test]
    fn freed_slots_take_queued_jobs_then_wait_idle_until_the_next_read() {
        let mut admission = Admission::new(2);
        for n in 0..20 {
            admission.request("suite", n);
        }
        assert_eq!(drain(&mut admission).len(), 2);
        // Two results: each freed slot takes one of the two queued jobs, so two places open.
        admission.slot_freed();
        admission.slot_freed();
        assert_eq!(drain(&mut admission).len(), 2);
        // A third result: that slot takes one queued job, so one place opens.
        admission.slot_freed();
        assert_eq!(drain(&mut admission).len(), 1);
        // The server says nothing is queued: a freed slot now waits idle, and the next job
        // goes straight to it without using a place in the queue.
        admission.observe(0, 0);
        assert_eq!(drain(&mut admission).len(), 2);
        admission.slot_freed();
        admission.slot_freed();
        assert_eq!(drain(&mut admission).len(), 2, "one per queued job taken");
        admission.observe(0, 0);
        admission.slot_freed();
        assert_eq!(
            drain(&mut admission).len(),
            3,
            "the idle slot and the lookahead"
        );
        // The server then says the queue is empty and three slots wait: the read wins.
        admission.observe(0, 3);
        assert_eq!(drain(&mut admission).len(), 5);
    }

    #[test]
    fn a_removed_proof_gives_back_its_requests_and_its_turns() {
        let mut admission = Admission::new(10);
        admission.request("cancelled", 0);
        admission.request("cancelled", 1);
        admission.request("kept", 0);
        assert_eq!(admission.remove(&"cancelled"), [0, 1]);
        assert_eq!(drain(&mut admission), [("kept", 0)]);
        assert!(!admission.has_waiting());
    }

    #[test]
    fn an_unused_grant_returns_its_room() {
        let mut admission = Admission::new(1);
        admission.request("a", 0);
        admission.request("a", 1);
        assert_eq!(admission.grant(), Some(("a", 0)));
        assert_eq!(admission.grant(), None);
        admission.unused();
        assert_eq!(admission.grant(), Some(("a", 1)));
    }
}
