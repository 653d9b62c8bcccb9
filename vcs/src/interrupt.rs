//! How a person stops a long change of the working folder (Ctrl-C): a flag a signal
//! handler sets, and whether ending the process at once is harmless right now.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::{Result, VcsError};

/// How a person stops a long change of the working folder. A signal handler sets
/// [`Interrupt::requested_flag`]; while the folder is being changed,
/// [`Interrupt::default_allowed_flag`] is false, so the handler must not end the process
/// at once: lifeos stops between two files instead and leaves the journal to finish from.
#[derive(Debug, Clone)]
pub struct Interrupt {
    requested: Arc<AtomicBool>,
    default_allowed: Arc<AtomicBool>,
}

impl Default for Interrupt {
    fn default() -> Self {
        Interrupt {
            requested: Arc::new(AtomicBool::new(false)),
            default_allowed: Arc::new(AtomicBool::new(true)),
        }
    }
}

impl Interrupt {
    /// Set (by a signal handler) when the person asks to stop.
    pub fn requested_flag(&self) -> Arc<AtomicBool> {
        self.requested.clone()
    }

    /// True while ending the process at once is harmless.
    pub fn default_allowed_flag(&self) -> Arc<AtomicBool> {
        self.default_allowed.clone()
    }

    /// Whether the person asked to stop.
    pub(crate) fn requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }

    pub(crate) fn check(&self) -> Result<()> {
        if self.requested() {
            Err(VcsError::Interrupted)
        } else {
            Ok(())
        }
    }

    /// Defers the signals' default action until the guard is dropped, which gives back
    /// what was there before: a long-running process that handles signals itself (`lifeos
    /// watch`) keeps handling them after the change.
    pub(crate) fn defer(&self) -> Deferred<'_> {
        let before = self.default_allowed.swap(false, Ordering::SeqCst);
        if before {
            // A signal would have ended the process; what is flagged is from an earlier
            // change, not a request to stop this one.
            self.requested.store(false, Ordering::SeqCst);
        }
        Deferred(self, before)
    }
}

/// Holds back the signals' default action until dropped ([`Interrupt::defer`]).
pub(crate) struct Deferred<'a>(&'a Interrupt, bool);

impl Drop for Deferred<'_> {
    fn drop(&mut self) {
        self.0.default_allowed.store(self.1, Ordering::SeqCst);
    }
}
