//! Pure: the record of a field the manager put back after another field
//! manager changed it. The manager writes it as the note of a `Reverted`
//! Warning Event on the Runner; `diagnose` reads it back from there to
//! report a fight without watching. One format, written and parsed here;
//! the manager finds a revert and its author in `manager::revert_attribution`.

/// A field of ours that someone else changed and a pass put back.
#[derive(Debug, Clone, PartialEq)]
pub struct Revert {
    pub kind: String,
    pub name: String,
    /// `spec.replicas`, ...
    pub field: String,
    /// The field manager whose entry held the value we found; None when
    /// no entry held it (the field was removed).
    pub by: Option<String>,
}

const REMOVED: &str = "removed by a writer that holds no entry for it";

impl Revert {
    /// The Event's note: `Reverted spec.replicas on Deployment web: changed by kubectl`.
    pub fn note(&self) -> String {
        let by = match &self.by {
            Some(m) => format!("changed by {m}"),
            None => REMOVED.into(),
        };
        format!("Reverted {} on {} {}: {by}", self.field, self.kind, self.name)
    }

    /// Reads a note [`Revert::note`] wrote; None for anything else.
    pub fn parse(note: &str) -> Option<Revert> {
        let rest = note.strip_prefix("Reverted ")?;
        let (what, by) = rest.split_once(": ")?;
        let (field, object) = what.split_once(" on ")?;
        let (kind, name) = object.split_once(' ')?;
        let by = match by.strip_prefix("changed by ") {
            Some(m) => Some(m.to_string()),
            None if by == REMOVED => None,
            None => return None,
        };
        Some(Revert { kind: kind.into(), name: name.into(), field: field.into(), by })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_reads_back_as_what_was_reverted() {
        let r = Revert {
            kind: "Deployment".into(),
            name: "web".into(),
            field: "spec.replicas".into(),
            by: Some("kubectl".into()),
        };
        assert_eq!(r.note(), "Reverted spec.replicas on Deployment web: changed by kubectl");
        assert_eq!(Revert::parse(&r.note()), Some(r.clone()));
        let removed = Revert { by: None, ..r };
        assert_eq!(Revert::parse(&removed.note()), Some(removed));
        assert_eq!(Revert::parse("Reverted nothing"), None);
        assert_eq!(Revert::parse("Scaled up replica set web-1 to 2"), None);
    }
}
