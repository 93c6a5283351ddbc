//! The private supertrait of the traits only this crate implements: user code can name
//! them in bounds but cannot implement them.
//!
//! Sealed directly: `Plan`, `Stage`, `Execute`, `StoreFactory`, `SideOutputFactory`,
//! `BuildRejectedOutput`, `MakeWindowFunction`, `MemoryRoot`, `Persist`; through their
//! supertraits: `BuildPlan` and `RunMemory` (`Plan`), `BuildStage` (`Stage`).

/// Implemented by this crate's plan, stage, root, runtime and state types only.
pub trait Sealed {}
