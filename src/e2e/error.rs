//! What `e2e` fails with. A step's error becomes that step's detail line in
//! the report; an error from setup (the namespace, the CRD) ends the run and
//! reaches the CLI, which converts it.

use crate::error::ApiError;

/// Result with e2e's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Api(#[from] ApiError),

    /// A read or wait of the shared client layer failed (the CRD wait, the
    /// children reader).
    #[error(transparent)]
    Cluster(crate::error::Error),

    /// A step that does not apply to this cluster: it is skipped, saying
    /// why (the webhook step where no webhook is registered).
    #[error("skipped: {0}")]
    NotApplicable(String),

    /// A step ran but what it checks did not hold.
    #[error("{0}")]
    StepFailed(String),

    #[error("cannot encode {what} as JSON: {source}")]
    Encode { what: &'static str, source: serde_json::Error },

    #[error("cannot create {}: {source}", .dir.display())]
    Artifacts { dir: std::path::PathBuf, source: std::io::Error },
}

/// An API failure stays an [`Error::Api`], whichever layer made it.
impl From<crate::error::Error> for Error {
    fn from(e: crate::error::Error) -> Self {
        match e {
            crate::error::Error::Api(e) => Error::Api(e),
            other => Error::Cluster(other),
        }
    }
}
