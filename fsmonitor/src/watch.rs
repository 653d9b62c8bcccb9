//! What `lifeos watch` waits for in the folder: the monitor's wakes, read from an async
//! task. Wakes only say when to look: what changed is always found by a snapshot, so a
//! lost event or a failed watcher costs a delay, never a wrong answer.

use std::path::Path;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use crate::{Monitor, MonitorError, Wake};

/// Watches a folder (recursively, leaving out `.lifeos` and `.git`, but for one file of
/// `.lifeos` whose changes it reports as [`Wake::Trust`]).
pub struct FolderWatch {
    _monitor: Monitor,
    rx: UnboundedReceiver<Wake>,
}

impl FolderWatch {
    /// Starts watching `root`, whose repository data is `dot`; `trust` is the file that
    /// pins the trusted rules. Wakes are read from an async task ([`FolderWatch::next`]);
    /// the monitor's own thread sends them.
    pub fn start(root: &Path, dot: &Path, trust: &Path) -> Result<FolderWatch, MonitorError> {
        let (tx, rx) = unbounded_channel();
        let on_wake = Box::new(move |w| {
            let _ = tx.send(w);
        });
        let monitor = Monitor::start(root, dot, trust.file_name(), Some(on_wake))?;
        Ok(FolderWatch {
            _monitor: monitor,
            rx,
        })
    }

    /// The next change; `None` once the watcher has stopped (then only periodic rescans
    /// find changes).
    pub async fn next(&mut self) -> Option<Wake> {
        self.rx.recv().await
    }
}
