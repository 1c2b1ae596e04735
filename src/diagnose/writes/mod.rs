//! Pure: writes seen while `diagnose --observe` watched, who made them, and
//! what they add up to. A snapshot cannot show a write loop or two field
//! managers taking a field from each other: both leave the object looking
//! fine at any one moment. Watching for a while and attributing each write
//! to the field manager that made it shows both.
//!
//! ```text
//! watch event (before, after) ─► attribute: writer, changed fields ─► Write
//! the Writes of each object   ─► tally: fights (a field changing hands),
//!                                       storms (writes a minute, unexplained)
//! ```
//!
//! The watching is `gather::observe`; turning fights and storms into
//! findings is `checks::writes`. Nothing here does I/O or reads the clock:
//! a [`Write`] carries its time into the window.

use std::fmt;
use std::time::Duration;

pub mod attribute;
pub mod diff;
pub mod tally;

/// The field manager behind a write, as its `managedFields` entry names it.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Writer {
    /// `kubectl`, `kube-controller-manager`, `kubectl-runner`, ...
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// `status`, `scale`, or empty for the object itself.
    pub subresource: String,
}

/// `kubectl (Update)`, `kube-controller-manager (Update, status)`.
impl fmt::Display for Writer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}", self.manager, self.operation)?;
        if !self.subresource.is_empty() {
            write!(f, ", {}", self.subresource)?;
        }
        write!(f, ")")
    }
}

/// One write to an object: a new resourceVersion on the watch.
#[derive(Debug, Clone, PartialEq)]
pub struct Write {
    /// When it was seen, from the start of the window.
    pub at: Duration,
    /// `None` when `managedFields` do not tell.
    pub writer: Option<Writer>,
    /// The fields whose value changed (`spec.replicas`), sorted; empty for
    /// a write that changed nothing anyone reads.
    pub fields: Vec<String>,
    /// Every changed field lies under `status`.
    pub status_only: bool,
    /// `metadata.generation` moved: the object's spec changed.
    pub generation_changed: bool,
}

/// The writes to one object during the window, in the order seen.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectWrites {
    /// `Runner`, `Deployment`, `Pod`, ...
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub writes: Vec<Write>,
}

impl ObjectWrites {
    /// `Deployment app/web`.
    pub fn display(&self) -> String {
        format!("{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// What watching one Runner, its children and its Pods for `window` saw.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Observed {
    pub window: Duration,
    /// Objects written at least once; quiet ones are absent.
    pub objects: Vec<ObjectWrites>,
}
