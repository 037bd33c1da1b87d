//! The coordinator's admission loop: the async side of [`crate::admission`]. Proofs ask for a
//! turn before each job they publish; the loop grants turns in round-robin order while the work
//! queue is shallow, reading its depth from the workers' consumer whenever a result is applied
//! (a worker slot just freed) and on a short timer while proofs wait. While the fleet-wide halt
//! is set it grants none; requests keep their places until it is lifted.

use crate::admission::Admission;
use assay_common::ProofId;
use async_nats::jetstream::consumer::PullConsumer;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, mpsc, oneshot};

/// How often the queue's depth is re-read while proofs wait and no result arrives.
const POLL: Duration = Duration::from_millis(200);

enum Message {
    Request(ProofId, oneshot::Sender<()>),
    Remove(ProofId),
    Halt(bool),
}

#[derive(Debug, thiserror::Error)]
#[error("proof {proof_id} was not admitted: the coordinator is stopping or the proof ended")]
pub struct NotAdmitted {
    pub proof_id: ProofId,
}

/// A handle on the admission loop; the loop stops when every handle is dropped.
#[derive(Clone)]
pub struct Admitter {
    messages: mpsc::UnboundedSender<Message>,
    freed: Arc<Notify>,
}

impl Admitter {
    /// Starts the loop over the workers' consumer; `lookahead` jobs may wait in the queue
    /// beyond the workers' idle slots.
    pub fn spawn(consumer: PullConsumer, lookahead: usize) -> Self {
        let (messages, rx) = mpsc::unbounded_channel();
        let freed = Arc::new(Notify::new());
        tokio::spawn(run(consumer, lookahead, rx, freed.clone()));
        Self { messages, freed }
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

    /// A result was applied: a worker slot is free, so the queue's depth is worth re-reading.
    pub fn slot_freed(&self) {
        self.freed.notify_one();
    }
}

async fn run(
    mut consumer: PullConsumer,
    lookahead: usize,
    mut messages: mpsc::UnboundedReceiver<Message>,
    freed: Arc<Notify>,
) {
    let mut admission: Admission<ProofId, oneshot::Sender<()>> = Admission::new(lookahead);
    let mut halted = false;
    let mut poll = tokio::time::interval(POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            message = messages.recv() => match message {
                None => return,
                Some(Message::Request(proof_id, waiter)) => admission.request(proof_id, waiter),
                Some(Message::Remove(proof_id)) => drop(admission.remove(&proof_id)),
                Some(Message::Halt(now)) => {
                    halted = now;
                    if !halted {
                        observe(&mut consumer, &mut admission).await;
                    }
                }
            },
            () = freed.notified() => observe(&mut consumer, &mut admission).await,
            _ = poll.tick(), if admission.has_waiting() => observe(&mut consumer, &mut admission).await,
        }
        while !halted && let Some((_, waiter)) = admission.grant() {
            if waiter.send(()).is_err() {
                admission.unused();
            }
        }
    }
}

async fn observe(
    consumer: &mut PullConsumer,
    admission: &mut Admission<ProofId, oneshot::Sender<()>>,
) {
    match consumer.info().await {
        Ok(info) => admission.observe(info.num_pending as usize, info.num_waiting),
        Err(e) => {
            tracing::warn!(error = %e, "failed to read the work queue's depth; admission waits")
        }
    }
}
