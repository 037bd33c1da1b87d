//! The coordinator's admission loop: the async side of [`assay_engine::admission`]. Proofs ask for a
//! turn before each job they publish; the loop grants turns in round-robin order while the work
//! queue is shallow. Each applied result (a worker slot just freed) updates the estimate of the
//! queue's depth; the depth itself is read from the workers' consumer after a result at most
//! every [`READ_EVERY`], and on a short timer while proofs wait. (A read per result cost a
//! JetStream API call per job and held a fleet of fast jobs to 2,400 jobs/s.) While the
//! fleet-wide halt is set it grants none; requests keep their places until it is lifted.

use assay_common::ProofId;
use assay_engine::admission::Admission;
use async_nats::jetstream::consumer::PullConsumer;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// How often the queue's depth is re-read while proofs wait and no result arrives.
const POLL: Duration = Duration::from_millis(200);

/// The shortest time between two reads of the queue's depth prompted by results.
const READ_EVERY: Duration = Duration::from_millis(10);

enum Message {
    Request(ProofId, oneshot::Sender<()>),
    Remove(ProofId),
    Halt(bool),
    SlotFreed,
}

/// A proof's job was not let into the queue: the loop stopped or the proof was removed.
#[derive(Debug, thiserror::Error)]
#[error("proof {proof_id} was not admitted: the coordinator is stopping or the proof ended")]
pub struct NotAdmitted {
    /// The proof whose job waited for its turn.
    pub proof_id: ProofId,
}

/// A handle on the admission loop; the loop stops when every handle is dropped.
#[derive(Clone)]
pub struct Admitter {
    messages: mpsc::UnboundedSender<Message>,
}

impl Admitter {
    /// Starts the loop over the workers' consumer; `lookahead` jobs may wait in the queue
    /// beyond the workers' idle slots.
    pub fn spawn(consumer: PullConsumer, lookahead: usize) -> Self {
        let (messages, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(consumer, lookahead, rx));
        Self { messages }
    }

    /// Waits for `proof_id`'s turn to put one job in the queue.
    pub async fn admit(&self, proof_id: &ProofId) -> Result<(), NotAdmitted> {
        let not_admitted = || NotAdmitted {
            proof_id: proof_id.clone(),
        };
        let (tx, rx) = oneshot::channel();
        self.messages
            .send(Message::Request(proof_id.clone(), tx))
            .map_err(|_| not_admitted())?;
        rx.await.map_err(|_| not_admitted())
    }

    /// A proof that finished or was cancelled gives up its turns.
    pub fn remove(&self, proof_id: &ProofId) {
        let _ = self.messages.send(Message::Remove(proof_id.clone()));
    }

    /// Sets (`true`) or lifts the fleet-wide halt.
    pub fn set_halted(&self, halted: bool) {
        let _ = self.messages.send(Message::Halt(halted));
    }

    /// A result was applied: a worker slot is free.
    pub fn slot_freed(&self) {
        let _ = self.messages.send(Message::SlotFreed);
    }
}

async fn run(
    mut consumer: PullConsumer,
    lookahead: usize,
    mut messages: mpsc::UnboundedReceiver<Message>,
) {
    let mut admission: Admission<ProofId, oneshot::Sender<()>> = Admission::new(lookahead);
    let mut halted = false;
    let mut poll = tokio::time::interval(POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_read = Instant::now();
    // A slot freed since the last read: the depth is read once READ_EVERY has passed.
    let mut read_due = false;
    loop {
        let next_read = last_read + READ_EVERY;
        tokio::select! {
            message = messages.recv() => match message {
                None => return,
                Some(Message::Request(proof_id, waiter)) => admission.request(proof_id, waiter),
                Some(Message::Remove(proof_id)) => drop(admission.remove(&proof_id)),
                Some(Message::Halt(now)) => {
                    halted = now;
                    if !halted {
                        last_read = observe(&mut consumer, &mut admission).await;
                    }
                }
                Some(Message::SlotFreed) => {
                    admission.slot_freed();
                    read_due = true;
                }
            },
            () = tokio::time::sleep_until(next_read), if read_due => {
                last_read = observe(&mut consumer, &mut admission).await;
                read_due = false;
            }
            _ = poll.tick(), if admission.has_waiting() => {
                last_read = observe(&mut consumer, &mut admission).await;
            }
        }
        while !halted && let Some((_, waiter)) = admission.grant() {
            if waiter.send(()).is_err() {
                admission.unused();
            }
        }
    }
}

/// Reads the queue's depth into `admission`; returns when it was read.
async fn observe(
    consumer: &mut PullConsumer,
    admission: &mut Admission<ProofId, oneshot::Sender<()>>,
) -> Instant {
    match consumer.info().await {
        Ok(info) => admission.observe(info.num_pending as usize, info.num_waiting),
        Err(e) => {
            tracing::warn!(error = %e, "failed to read the work queue's depth; admission waits")
        }
    }
    Instant::now()
}
