//! Pure: which key's pass starts next. No Kubernetes types: keys are
//! anything hashable, the clock is passed in, and the caller runs the
//! passes (the manager's workers).
//!
//! The guarantees, client-go's workqueue's first:
//! - a key is at most once in the queue, and never in two passes at once: a
//!   key added while its pass runs is marked dirty and queued again when the
//!   pass is done ([`Queue::done`]);
//! - first in, first out within a priority: the key that waited longest
//!   starts first (kube-runtime's scheduler took the next key from a hash
//!   set, and a key that hashed late kept losing to newer ones: 1,000
//!   Runners created in order waited up to 55 s while the backlog took 7 s);
//! - three priorities. Above controller-runtime's two (since v0.23), where
//!   a list, a relist, a resync or a child's progress ([`Priority::Low`])
//!   waits for everything else, a change someone made to what exists (a
//!   new generation, a deletion, a child edited or deleted by another
//!   hand: [`Priority::High`]) also goes before a Runner's first pass
//!   ([`Priority::Normal`]): in a burst of 1,000 creates, a person's
//!   change to another Runner would otherwise queue behind the whole
//!   burst (20 s p99 where the drain took 20 s). A key queued lower that
//!   gets a more urgent add moves to that priority's tail and keeps its
//!   wait;
//! - and no starvation, where controller-runtime's strict order starves the
//!   low priority under a steady high stream (its issue #3496): a priority
//!   with work waiting that [`LOW_EVERY`] - 1 starts in a row passed over
//!   gets the next start (the more urgent first when two are due). So a
//!   key at position `p` of a priority below the most urgent one waiting
//!   (1 = its head) starts within `p * (LOW_EVERY + 1)` starts, however
//!   steady the stream above it: with 16 passes in flight of 20 ms each,
//!   position 100 of a relist waits at most 100 * 5 * 20 ms / 16 = 0.6 s
//!   more than an empty queue above would let it.
//!
//! Delays: [`Queue::add_after`] (a requeue) and, for a failed pass, a per-key
//! exponential backoff ([`Next::Backoff`], the policy given to
//! [`Queue::new`]); a key waiting for its delay is not queued, and an add
//! in the meantime queues it at once (the earlier of the two wins).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::Hash;
use std::time::{Duration, Instant};

/// A priority with work waiting gets at least one start in this many
/// (one more when two lower priorities are due at once).
pub const LOW_EVERY: u32 = 4;

/// How many priorities there are.
const LEVELS: usize = 3;

/// How urgent a key's pass is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    /// A change someone made to what exists: a new generation, a
    /// deletion, a child edited or deleted by another hand.
    High,
    /// A Runner's first pass: it was just created.
    Normal,
    /// Work the manager finds itself: a list, a relist, a resync, a child's
    /// progress, a requeue.
    Low,
}

impl Priority {
    pub const ALL: [Priority; LEVELS] = [Priority::High, Priority::Normal, Priority::Low];

    fn index(self) -> usize {
        self as usize
    }

    /// The label value in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::High => "high",
            Priority::Normal => "normal",
            Priority::Low => "low",
        }
    }
}

/// What the pass that ended asks for next; `T` tags the delayed pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next<T> {
    /// Nothing until the next add; the key's failures are forgotten.
    Done,
    /// Again after this long (at Low priority); failures forgotten.
    After(Duration, T),
    /// It failed in a way that passes soon (a conflict): again after this
    /// long, at the priority it ran at (a person's change retried at Low
    /// would wait behind every Low key); failures kept as they are.
    RetryAfter(Duration, T),
    /// It failed: again after the backoff of its failures in a row, at the
    /// priority it ran at.
    Backoff(T),
}

/// A key's pass to start: why it was queued, and how long it waited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start<K, T> {
    pub key: K,
    pub priority: Priority,
    /// What queued it (the first add since it was last started, or the
    /// High add that moved it up).
    pub tag: T,
    pub waited: Duration,
}

/// Why a key is queued and since when.
#[derive(Debug, Clone, Copy)]
struct Queued<T> {
    priority: Priority,
    /// Its entry in the priority's FIFO; an entry with another number is
    /// stale (the key moved up, or started).
    seq: u64,
    since: Instant,
    tag: T,
}

#[derive(Debug)]
enum State<T> {
    Queued(Queued<T>),
    /// In a pass since `started`; `dirty`: added meanwhile.
    Running {
        started: Instant,
        priority: Priority,
        dirty: Option<(Priority, Instant, T)>,
    },
}

/// The work queue. See the module doc for its guarantees.
pub struct Queue<K, T> {
    fifo: [VecDeque<(K, u64)>; LEVELS],
    depth: [usize; LEVELS],
    state: HashMap<K, State<T>>,
    /// Keys waiting for a delay: when due, with the priority and tag to
    /// queue them at. One entry per key; `due` indexes them by time.
    delayed: HashMap<K, (Instant, u64, Priority, T)>,
    due: BTreeMap<(Instant, u64), K>,
    failures: HashMap<K, u32>,
    backoff: fn(u32) -> Duration,
    /// Per priority: starts in a row that passed it over while it had
    /// work waiting.
    passed_over: [u32; LEVELS],
    seq: u64,
}

impl<K: Hash + Eq + Clone, T: Copy> Queue<K, T> {
    /// An empty queue; `backoff(n)` is the wait after the n-th failure in a row.
    pub fn new(backoff: fn(u32) -> Duration) -> Self {
        Queue {
            fifo: Default::default(),
            depth: [0; LEVELS],
            state: HashMap::new(),
            delayed: HashMap::new(),
            due: BTreeMap::new(),
            failures: HashMap::new(),
            backoff,
            passed_over: [0; LEVELS],
            seq: 0,
        }
    }

    /// Queues `key` (see the module doc); true when it was not queued yet
    /// at this priority or above (what `adds` counts).
    pub fn add(&mut self, key: K, priority: Priority, tag: T, now: Instant) -> bool {
        match self.state.get_mut(&key) {
            Some(State::Running { dirty, .. }) => match dirty {
                Some((p, _, t)) if priority < *p => {
                    (*p, *t) = (priority, tag);
                    true
                }
                Some(_) => false,
                None => {
                    *dirty = Some((priority, now, tag));
                    true
                }
            },
            Some(State::Queued(q)) if q.priority <= priority => false,
            Some(State::Queued(q)) => {
                // Moves up: the lower entry goes stale; it keeps its wait.
                let since = q.since;
                self.depth[q.priority.index()] -= 1;
                self.enqueue(key, priority, tag, since);
                true
            }
            None => {
                self.enqueue(key, priority, tag, now);
                true
            }
        }
    }

    fn enqueue(&mut self, key: K, priority: Priority, tag: T, since: Instant) {
        self.seq += 1;
        let seq = self.seq;
        self.fifo[priority.index()].push_back((key.clone(), seq));
        self.depth[priority.index()] += 1;
        self.state.insert(key, State::Queued(Queued { priority, seq, since, tag }));
    }

    /// Queues `key` at `now + delay`, unless it is due sooner already.
    pub fn add_after(&mut self, key: K, delay: Duration, priority: Priority, tag: T, now: Instant) {
        let at = now + delay;
        if let Some((due, seq, ..)) = self.delayed.get(&key) {
            if *due <= at {
                return;
            }
            self.due.remove(&(*due, *seq));
        }
        self.seq += 1;
        self.due.insert((at, self.seq), key.clone());
        self.delayed.insert(key, (at, self.seq, priority, tag));
    }

    /// Queues every delayed key that is due at `now`.
    pub fn release_due(&mut self, now: Instant) {
        while let Some(entry) = self.due.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let key = entry.remove();
            if let Some((_, _, priority, tag)) = self.delayed.remove(&key) {
                self.add(key, priority, tag, now);
            }
        }
    }

    /// When the next delayed key is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.due.first_key_value().map(|((at, _), _)| *at)
    }

    /// The next key to start, now marked running; None when nothing is
    /// queued. The caller bounds how many run at once.
    pub fn start(&mut self, now: Instant) -> Option<Start<K, T>> {
        let waiting = Priority::ALL.map(|p| self.depth[p.index()] > 0);
        let top = Priority::ALL.into_iter().find(|p| waiting[p.index()])?;
        let priority = Priority::ALL
            .into_iter()
            .filter(|p| *p > top && waiting[p.index()])
            .find(|p| self.passed_over[p.index()] + 1 >= LOW_EVERY)
            .unwrap_or(top);
        for p in Priority::ALL {
            let i = p.index();
            self.passed_over[i] = if waiting[i] && p != priority { self.passed_over[i] + 1 } else { 0 };
        }
        let queue = &mut self.fifo[priority.index()];
        while let Some((key, seq)) = queue.pop_front() {
            let Some(State::Queued(q)) = self.state.get(&key) else { continue };
            if q.seq != seq {
                continue;
            }
            let q = *q;
            self.depth[priority.index()] -= 1;
            self.state.insert(key.clone(), State::Running { started: now, priority, dirty: None });
            let waited = now.saturating_duration_since(q.since);
            return Some(Start { key, priority, tag: q.tag, waited });
        }
        unreachable!("the depth counts the live entries of each queue")
    }

    /// The pass of `key` ended; `next` says what it asks for. Returns how
    /// long it ran (None for a key not running) and the delay it was given
    /// (a requeue or a retry).
    pub fn done(&mut self, key: &K, next: Next<T>, now: Instant) -> Option<(Duration, Option<Duration>)> {
        let Some(State::Running { started, priority, dirty }) = self.state.remove(key) else { return None };
        let delay = match next {
            Next::Done => {
                self.failures.remove(key);
                None
            }
            Next::After(d, tag) => {
                self.failures.remove(key);
                Some((d, Priority::Low, tag))
            }
            Next::RetryAfter(d, tag) => Some((d, priority, tag)),
            Next::Backoff(tag) => {
                let n = self.failures.entry(key.clone()).or_default();
                *n = n.saturating_add(1);
                Some(((self.backoff)(*n), priority, tag))
            }
        };
        if let Some((p, since, tag)) = dirty {
            self.enqueue(key.clone(), p, tag, since);
        }
        if let Some((d, p, tag)) = delay {
            self.add_after(key.clone(), d, p, tag, now);
        }
        Some((now.saturating_duration_since(started), delay.map(|(d, ..)| d)))
    }

    /// Keys queued at `priority` (not running, not waiting for a delay).
    pub fn depth(&self, priority: Priority) -> usize {
        self.depth[priority.index()]
    }

    /// Keys waiting for a delay (a requeue or a retry).
    pub fn delayed(&self) -> usize {
        self.delayed.len()
    }

    /// How long the key queued longest ago has waited; what `diagnose`
    /// shows beside the depth.
    pub fn oldest_wait(&self, now: Instant) -> Option<Duration> {
        self.state
            .values()
            .filter_map(|s| match s {
                State::Queued(q) => Some(now.saturating_duration_since(q.since)),
                State::Running { .. } => None,
            })
            .max()
    }

    /// The passes running at `now`: how many, their time so far added up,
    /// and the longest (controller-runtime's unfinished work and longest
    /// running processor).
    pub fn running(&self, now: Instant) -> (usize, Duration, Duration) {
        self.state.values().fold((0, Duration::ZERO, Duration::ZERO), |(n, sum, max), s| match s {
            State::Running { started, .. } => {
                let d = now.saturating_duration_since(*started);
                (n + 1, sum + d, max.max(d))
            }
            State::Queued(_) => (n, sum, max),
        })
    }

    /// Forgets `key`'s failures and any delay (the object is gone).
    pub fn forget(&mut self, key: &K) {
        self.failures.remove(key);
        if let Some((due, seq, ..)) = self.delayed.remove(key) {
            self.due.remove(&(due, seq));
        }
    }
}
