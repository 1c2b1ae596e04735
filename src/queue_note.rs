//! Pure: a running manager's work queue in one annotation of its presence
//! Lease (renewed every few seconds anyway, so it costs no write), and what
//! `diagnose` says of it. One format, written by the manager and read by
//! diagnose; read back as numbers only, so nothing of the annotation
//! reaches a terminal as it was written.

use std::time::Duration;

/// How many passes wait, by priority, and how long the oldest has waited.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct QueueNote {
    pub high: u64,
    pub normal: u64,
    pub low: u64,
    pub oldest_wait: Duration,
}

impl QueueNote {
    /// `high=2 normal=5 low=10 oldestWaitMs=3200`.
    pub fn encode(&self) -> String {
        format!(
            "high={} normal={} low={} oldestWaitMs={}",
            self.high,
            self.normal,
            self.low,
            self.oldest_wait.as_millis()
        )
    }

    /// The note [`QueueNote::encode`] wrote; None for anything else. An
    /// older manager's note has no `normal` (it had two priorities).
    pub fn parse(s: &str) -> Option<QueueNote> {
        let mut note = QueueNote::default();
        let mut seen = std::collections::BTreeSet::new();
        for part in s.split_whitespace() {
            let (key, value) = part.split_once('=')?;
            let n: u64 = value.parse().ok()?;
            match key {
                "high" => note.high = n,
                "normal" => note.normal = n,
                "low" => note.low = n,
                "oldestWaitMs" => note.oldest_wait = Duration::from_millis(n),
                _ => return None,
            }
            if !seen.insert(key) {
                return None;
            }
        }
        seen.remove("normal");
        (seen.len() == 3).then_some(note)
    }

    /// One line for people.
    pub fn describe(&self) -> String {
        let waiting = self.high + self.normal + self.low;
        if waiting == 0 {
            return "work queue: nothing waiting".into();
        }
        format!(
            "work queue: {waiting} Runner(s) waiting for a pass ({} high priority, {} normal, {} low), the oldest \
             for {:.1} s",
            self.high,
            self.normal,
            self.low,
            self.oldest_wait.as_secs_f64()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_reads_back_as_written_and_anything_else_is_refused() {
        let n = QueueNote { high: 2, normal: 5, low: 10, oldest_wait: Duration::from_millis(3200) };
        assert_eq!(QueueNote::parse(&n.encode()), Some(n));
        let older = QueueNote::parse("high=2 low=10 oldestWaitMs=3200");
        assert_eq!(older, Some(QueueNote { normal: 0, ..n }), "an older manager's note");
        for bad in [
            "",
            "high=2 low=10",
            "high=2 normal=1 normal=1 low=10 oldestWaitMs=1",
            "high=1 high=2 oldestWaitMs=1",
            "high=2 low=x oldestWaitMs=1",
            "high=1 low=1 oldestWaitMs=1 \x1b[31m=1",
            "evil",
        ] {
            assert_eq!(QueueNote::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_line_says_how_many_wait_by_priority_and_the_oldest_wait() {
        let n = QueueNote { high: 2, normal: 5, low: 10, oldest_wait: Duration::from_millis(3200) };
        assert_eq!(
            n.describe(),
            "work queue: 17 Runner(s) waiting for a pass (2 high priority, 5 normal, 10 low), the oldest for 3.2 s"
        );
        assert_eq!(QueueNote::default().describe(), "work queue: nothing waiting");
    }
}
