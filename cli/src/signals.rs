//! Ctrl-C and termination signals. Outside a change of the working folder they end the
//! process at once, as usual: nothing is published until its data is durable, so that
//! is always safe. While the folder is being changed, lifeos stops between two files
//! instead and leaves the move journal for the next command to finish.

use std::sync::OnceLock;

use lifeos_vcs::interrupt::Interrupt;

static INTERRUPT: OnceLock<Interrupt> = OnceLock::new();

/// The process's interrupt flags, shared by every repository it opens.
pub fn interrupt() -> Interrupt {
    INTERRUPT.get_or_init(Interrupt::default).clone()
}

/// Connects SIGINT, SIGTERM and SIGHUP to the interrupt flags.
pub fn install() -> std::io::Result<()> {
    let i = interrupt();
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, i.requested_flag())?;
        signal_hook::flag::register_conditional_default(sig, i.default_allowed_flag())?;
    }
    Ok(())
}
