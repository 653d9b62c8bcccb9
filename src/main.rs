//! The `lifeos` binary. All of its behaviour lives in the `lifeos-cli` crate; this package
//! exists so that the end-to-end tests in `tests/` and the benches in `benches/` can drive
//! the real binary.

fn main() -> std::process::ExitCode {
    lifeos_cli::main()
}
