//! The work queue's guarantees (its module doc), checked on random runs of
//! adds, starts, completions, requeues and failures against a model of one
//! FIFO per priority: FIFO within a priority, no key twice in flight,
//! nothing lost, and work below the most urgent started within its bound
//! however steady the stream above it.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::work_queue::{LOW_EVERY, Next, Priority, Queue, Start};

fn backoff(n: u32) -> Duration {
    Duration::from_millis(10 * u64::from(n))
}

#[derive(Debug, Clone)]
enum Op {
    Add(u8, Priority),
    AddAfter(u8, u64),
    Start,
    /// Ends the running pass at this index (mod the number running).
    Done(usize, Next<()>),
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let priority = prop_oneof![Just(Priority::High), Just(Priority::Normal), Just(Priority::Low)];
    let next = prop_oneof![
        Just(Next::Done),
        (1u64..50).prop_map(|ms| Next::After(Duration::from_millis(ms), ())),
        Just(Next::Backoff(())),
        (1u64..50).prop_map(|ms| Next::RetryAfter(Duration::from_millis(ms), ())),
    ];
    prop_oneof![
        4 => (0u8..12, priority).prop_map(|(k, p)| Op::Add(k, p)),
        1 => (0u8..12, 1u64..40).prop_map(|(k, ms)| Op::AddAfter(k, ms)),
        4 => Just(Op::Start),
        3 => (0usize..16, next).prop_map(|(i, n)| Op::Done(i, n)),
        1 => (1u64..30).prop_map(Op::Advance),
    ]
}

/// What the queue should hold: a FIFO per priority, the running keys (the
/// priority they run at, their dirty mark), the delayed keys, failures in
/// a row, and for each key queued below High the start count when it was
/// queued and its position then.
#[derive(Default)]
struct Model {
    fifo: [VecDeque<u8>; 3],
    running: Vec<(u8, Priority, Option<Priority>)>,
    /// key -> (due, order of the delay, priority)
    delayed: HashMap<u8, (Instant, u64, Priority)>,
    delays: u64,
    failures: HashMap<u8, u32>,
    starts: u64,
    lower_since: HashMap<u8, (u64, u64)>,
    /// Keys added since their last start began (nothing may lose them).
    owed: HashSet<u8>,
}

fn idx(p: Priority) -> usize {
    match p {
        Priority::High => 0,
        Priority::Normal => 1,
        Priority::Low => 2,
    }
}

impl Model {
    fn queued(&self, k: u8) -> Option<Priority> {
        Priority::ALL.into_iter().find(|p| self.fifo[idx(*p)].contains(&k))
    }

    fn push(&mut self, k: u8, p: Priority) {
        self.fifo[idx(p)].push_back(k);
        if p != Priority::High {
            self.lower_since.insert(k, (self.starts, self.fifo[idx(p)].len() as u64));
        }
    }

    fn add(&mut self, k: u8, p: Priority) {
        self.owed.insert(k);
        if let Some((_, _, dirty)) = self.running.iter_mut().find(|(r, ..)| *r == k) {
            *dirty = Some(dirty.map_or(p, |d| d.min(p)));
            return;
        }
        match self.queued(k) {
            Some(q) if q <= p => {}
            Some(q) => {
                self.fifo[idx(q)].retain(|x| *x != k);
                self.lower_since.remove(&k);
                self.push(k, p);
            }
            None => self.push(k, p),
        }
    }

    fn add_after(&mut self, k: u8, delay: Duration, p: Priority, now: Instant) {
        let at = now + delay;
        if self.delayed.get(&k).is_some_and(|(due, ..)| *due <= at) {
            return;
        }
        self.delays += 1;
        self.delayed.insert(k, (at, self.delays, p));
    }

    fn release_due(&mut self, now: Instant) {
        let mut due: Vec<(Instant, u64, u8, Priority)> = self
            .delayed
            .iter()
            .filter(|(_, (at, ..))| *at <= now)
            .map(|(k, (at, n, p))| (*at, *n, *k, *p))
            .collect();
        due.sort();
        for (_, _, k, p) in due {
            self.delayed.remove(&k);
            self.add(k, p);
        }
    }

    fn done(&mut self, i: usize, next: Next<()>, now: Instant) -> u8 {
        let (k, ran_at, dirty) = self.running.remove(i);
        if let Some(p) = dirty {
            self.push(k, p);
        }
        match next {
            Next::Done => {
                self.failures.remove(&k);
            }
            Next::After(d, ()) => {
                self.failures.remove(&k);
                self.add_after(k, d, Priority::Low, now);
            }
            Next::RetryAfter(d, ()) => self.add_after(k, d, ran_at, now),
            Next::Backoff(()) => {
                let n = self.failures.entry(k).or_default();
                *n += 1;
                let d = backoff(*n);
                self.add_after(k, d, ran_at, now);
            }
        }
        k
    }
}

/// Runs `ops` on the queue and the model side by side, checking each start
/// against the model; then drains both and checks that every add was
/// served.
fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut now = Instant::now();
    let mut q: Queue<u8, ()> = Queue::new(backoff);
    let mut m = Model::default();
    for op in &ops {
        match *op {
            Op::Add(k, p) => {
                q.add(k, p, (), now);
                m.add(k, p);
            }
            Op::AddAfter(k, ms) => {
                q.add_after(k, Duration::from_millis(ms), Priority::Low, (), now);
                m.add_after(k, Duration::from_millis(ms), Priority::Low, now);
            }
            Op::Advance(ms) => now += Duration::from_millis(ms),
            Op::Start => {
                q.release_due(now);
                m.release_due(now);
                let got = q.start(now);
                check_start(&mut m, got)?;
            }
            Op::Done(i, next) => {
                if m.running.is_empty() {
                    continue;
                }
                let k = m.done(i % m.running.len(), next, now);
                prop_assert!(q.done(&k, next, now).is_some(), "{} was running", k);
            }
        }
        for p in Priority::ALL {
            prop_assert_eq!(q.depth(p), m.fifo[idx(p)].len(), "{:?} depth", p);
        }
        prop_assert_eq!(q.delayed(), m.delayed.len(), "delayed keys");
    }
    // Drain: let every delay come due, run and finish everything.
    while !m.running.is_empty() || !m.delayed.is_empty() || !m.fifo.iter().all(|f| f.is_empty()) {
        now += Duration::from_secs(60);
        for _ in 0..m.running.len() {
            let k = m.done(0, Next::Done, now);
            q.done(&k, Next::Done, now);
        }
        q.release_due(now);
        m.release_due(now);
        while let Some(s) = q.start(now) {
            check_start(&mut m, Some(s))?;
        }
    }
    prop_assert!(m.owed.is_empty(), "added and never started: {:?}", m.owed);
    prop_assert_eq!(q.start(now), None);
    Ok(())
}

fn check_start(m: &mut Model, got: Option<Start<u8, ()>>) -> Result<(), TestCaseError> {
    let Some(s) = got else {
        prop_assert!(m.fifo.iter().all(|f| f.is_empty()), "nothing started while {:?} waited", m.fifo);
        return Ok(());
    };
    prop_assert!(!m.running.iter().any(|(k, ..)| *k == s.key), "{} twice in flight", s.key);
    // First in, first out: the head of its priority's queue.
    prop_assert_eq!(m.fifo[idx(s.priority)].front(), Some(&s.key), "{:?}", m.fifo);
    m.fifo[idx(s.priority)].pop_front();
    if let Some((since, pos)) = m.lower_since.remove(&s.key) {
        let waited = m.starts - since;
        prop_assert!(
            waited < pos * u64::from(LOW_EVERY + 1),
            "key {} queued below High at position {} waited {} starts",
            s.key,
            pos,
            waited
        );
    }
    m.starts += 1;
    m.owed.remove(&s.key);
    m.running.push((s.key, s.priority, None));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_runs_keep_every_guarantee(ops in proptest::collection::vec(op(), 1..200)) {
        run(ops)?;
    }
}

#[test]
fn a_steady_high_stream_leaves_every_fourth_start_to_low_work() {
    let now = Instant::now();
    let mut q: Queue<u32, ()> = Queue::new(backoff);
    for k in 0..10 {
        q.add(1000 + k, Priority::Low, (), now);
    }
    let mut order = Vec::new();
    for k in 0..40 {
        q.add(k, Priority::High, (), now);
        let s = q.start(now).unwrap();
        order.push(s.priority);
        q.done(&s.key, Next::Done, now);
    }
    let lows = order.iter().filter(|p| **p == Priority::Low).count();
    assert_eq!(lows, 10, "{order:?}");
    assert!(order.chunks(LOW_EVERY as usize).all(|c| c.contains(&Priority::Low)), "{order:?}");
}

#[test]
fn a_change_overtakes_a_burst_of_creates_and_neither_starves_the_low_work() {
    let now = Instant::now();
    let mut q: Queue<u32, ()> = Queue::new(backoff);
    for k in 0..8 {
        q.add(100 + k, Priority::Normal, (), now);
        q.add(200 + k, Priority::Low, (), now);
    }
    q.add(1, Priority::High, (), now);
    let first = q.start(now).unwrap();
    assert_eq!(first.key, 1, "the change goes before the burst queued earlier");
    q.done(&first.key, Next::Done, now);
    let mut order = Vec::new();
    while let Some(s) = q.start(now) {
        order.push(s.priority);
        q.done(&s.key, Next::Done, now);
    }
    // Normal is the most urgent waiting: Low gets one start in LOW_EVERY.
    let head: Vec<_> = order[..8].to_vec();
    assert_eq!(head.iter().filter(|p| **p == Priority::Low).count(), 2, "{order:?}");
    assert!(head.chunks(LOW_EVERY as usize).all(|c| c.contains(&Priority::Low)), "{order:?}");
}

#[test]
fn a_key_added_while_running_runs_once_more_after_and_never_twice_at_once() {
    let now = Instant::now();
    let mut q: Queue<&str, ()> = Queue::new(backoff);
    q.add("web", Priority::Low, (), now);
    let s = q.start(now).unwrap();
    q.add("web", Priority::High, (), now);
    q.add("web", Priority::Low, (), now);
    assert!(q.start(now).is_none(), "not while its pass runs");
    q.done(&s.key, Next::Done, now);
    let again = q.start(now).expect("once more");
    assert_eq!((again.key, again.priority), ("web", Priority::High));
    q.done(&"web", Next::Done, now);
    assert!(q.start(now).is_none(), "and only once");
}

#[test]
fn a_high_add_moves_a_low_key_up_and_it_keeps_its_wait() {
    let t0 = Instant::now();
    let mut q: Queue<&str, &str> = Queue::new(backoff);
    q.add("a", Priority::High, "change", t0);
    q.add("b", Priority::Low, "listed", t0);
    let later = t0 + Duration::from_secs(2);
    q.add("b", Priority::High, "change", later);
    assert_eq!(q.depth(Priority::Low), 0);
    assert_eq!(q.start(later).map(|s| s.key), Some("a"));
    let b = q.start(later).unwrap();
    assert_eq!((b.key, b.priority, b.tag, b.waited), ("b", Priority::High, "change", Duration::from_secs(2)));
}

#[test]
fn failures_back_off_per_key_and_a_success_resets_them() {
    let t0 = Instant::now();
    let mut q: Queue<&str, ()> = Queue::new(backoff);
    let mut now = t0;
    let mut delays = Vec::new();
    q.add("web", Priority::High, (), now);
    for _ in 0..3 {
        let s = q.start(now).unwrap();
        delays.push(q.done(&s.key, Next::Backoff(()), now).unwrap().1.unwrap());
        now += Duration::from_secs(1);
        q.release_due(now);
    }
    assert_eq!(delays, [backoff(1), backoff(2), backoff(3)]);
    let s = q.start(now).unwrap();
    assert_eq!(q.done(&s.key, Next::Done, now).unwrap().1, None);
    q.add("web", Priority::High, (), now);
    let s = q.start(now).unwrap();
    assert_eq!(q.done(&s.key, Next::Backoff(()), now).unwrap().1, Some(backoff(1)), "counted from one again");
}

#[test]
fn a_conflict_retry_keeps_the_priority_it_ran_at_and_a_requeue_is_low() {
    let t0 = Instant::now();
    let mut q: Queue<&str, ()> = Queue::new(backoff);
    q.add("change", Priority::High, (), t0);
    let s = q.start(t0).unwrap();
    q.done(&s.key, Next::RetryAfter(Duration::from_millis(500), ()), t0);
    let later = t0 + Duration::from_secs(1);
    q.release_due(later);
    assert_eq!(q.depth(Priority::High), 1, "retried at High, not behind the Low backlog");
    let s = q.start(later).unwrap();
    q.done(&s.key, Next::After(Duration::from_millis(500), ()), later);
    q.release_due(later + Duration::from_secs(1));
    assert_eq!(q.depth(Priority::Low), 1, "a requeue is Low");
}

#[test]
fn a_requeue_comes_due_once_and_an_add_meanwhile_runs_at_once() {
    let t0 = Instant::now();
    let mut q: Queue<&str, ()> = Queue::new(backoff);
    q.add("web", Priority::High, (), t0);
    let s = q.start(t0).unwrap();
    q.done(&s.key, Next::After(Duration::from_secs(3), ()), t0);
    assert!(q.start(t0).is_none());
    assert_eq!(q.next_due(), Some(t0 + Duration::from_secs(3)));
    q.add_after("web", Duration::from_secs(5), Priority::Low, (), t0);
    assert_eq!(q.next_due(), Some(t0 + Duration::from_secs(3)), "the earlier wins");
    q.release_due(t0 + Duration::from_secs(3));
    assert_eq!(q.start(t0 + Duration::from_secs(3)).map(|s| s.priority), Some(Priority::Low));
    assert_eq!(q.next_due(), None);
}
