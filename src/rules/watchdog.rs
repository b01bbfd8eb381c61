//! The time limit on rule code: stops a Lua evaluation that runs past its limit without costing
//! the evaluations that don't.
//!
//! Lua 5.4 interrupts running code only from a hook, and while any hook is set its VM stops at
//! every instruction to service it: a count hook cost a quarter of every evaluation. So no hook is
//! set while rules run. Each thread's Lua state has a [`Slot`] saying since when it has been
//! evaluating; a watchdog thread looks at the slots every few milliseconds and sends `SIGURG` to
//! the thread of a slot past its limit. The signal handler, on that thread, installs a hook that
//! raises "time limit exceeded" at the next VM instruction. This is how the standalone `lua`
//! interpreter stops a script on Ctrl-C. One long call into C (a pathological `string.find`) is
//! not interrupted until it returns to the VM, as it was not under the count hook.

#![allow(unsafe_code)]

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock, PoisonError};
use std::thread::Thread;
use std::time::{Duration, Instant};

use mlua::ffi;

/// The error a stopped evaluation raises.
pub(super) const TIME_LIMIT_EXCEEDED: &CStr = c"time limit exceeded";

/// After this many ticks without an evaluation the watchdog sleeps until the next one starts.
const QUIET_TICKS: u32 = 200;
const MIN_TICK: Duration = Duration::from_millis(1);
const MAX_TICK: Duration = Duration::from_millis(50);

/// One Lua state's evaluation clock, shared with the watchdog.
pub(super) struct Slot {
    /// The thread that owns the state; the only one that evaluates in it.
    thread: libc::pthread_t,
    state: AtomicPtr<ffi::lua_State>,
    /// When the current evaluation started, in nanoseconds since `EPOCH` (never 0); 0 when idle.
    started: AtomicU64,
    /// The current evaluation's limit in nanoseconds.
    limit: AtomicU64,
    /// The `started` of the evaluation the watchdog decided to stop.
    stop: AtomicU64,
    /// Whether the stop hook is installed.
    hooked: AtomicBool,
    /// Evaluations started, so the watchdog can tell a quiet service from a busy one.
    evaluations: AtomicU64,
}

/// A slot in the watchdog's list; dropping it takes the slot out.
pub(super) struct Registration {
    slot: Arc<Slot>,
}

/// An evaluation being timed; dropping it ends the evaluation.
pub(super) struct Running<'a> {
    slot: &'a Slot,
}

thread_local! {
    /// The slot evaluating on this thread, for the signal handler and the stop hook.
    static ACTIVE: AtomicPtr<Slot> = const { AtomicPtr::new(std::ptr::null_mut()) };
}

static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

fn now() -> u64 {
    EPOCH.elapsed().as_nanos() as u64 + 1
}

struct Watchdog {
    slots: Mutex<Vec<Arc<Slot>>>,
    /// Set while the watchdog sleeps for want of evaluations; the next one to start wakes it.
    idle: AtomicBool,
    thread: OnceLock<Thread>,
}

static WATCHDOG: OnceLock<Result<Arc<Watchdog>, String>> = OnceLock::new();

fn watchdog() -> Result<&'static Arc<Watchdog>, String> {
    WATCHDOG.get_or_init(start).as_ref().map_err(Clone::clone)
}

/// Installs the signal handler and starts the watchdog thread, once per process.
fn start() -> Result<Arc<Watchdog>, String> {
    // SAFETY: `on_signal` only reads atomics and calls `lua_sethook`, which Lua's own
    // interpreter calls from its SIGINT handler (`laction` in lua.c; see the comment on
    // `lua_sethook` in ldebug.c).
    unsafe { signal_hook_registry::register(libc::SIGURG, on_signal) }
        .map_err(|error| format!("cannot install the rules' time-limit signal handler: {error}"))?;
    let watchdog = Arc::new(Watchdog {
        slots: Mutex::new(Vec::new()),
        idle: AtomicBool::new(false),
        thread: OnceLock::new(),
    });
    let watched = watchdog.clone();
    let handle = std::thread::Builder::new()
        .name("quagmire-rule-watchdog".into())
        .spawn(move || watched.watch())
        .map_err(|error| format!("cannot start the rules' time-limit watchdog: {error}"))?;
    let _ = watchdog.thread.set(handle.thread().clone());
    Ok(watchdog)
}

impl Watchdog {
    fn watch(&self) {
        let mut seen = 0;
        let mut quiet = 0;
        loop {
            let (busy, evaluations, tick) = self.scan();
            if evaluations != seen {
                seen = evaluations;
                quiet = 0;
            } else {
                quiet += 1;
            }
            if busy || quiet < QUIET_TICKS {
                std::thread::park_timeout(tick);
                continue;
            }
            // Sleep until an evaluation starts. One may have started since the scan and missed
            // `idle`, so scan again after setting it.
            self.idle.store(true, Ordering::SeqCst);
            if self.scan().0 {
                self.idle.store(false, Ordering::SeqCst);
                continue;
            }
            while self.idle.load(Ordering::SeqCst) {
                std::thread::park();
            }
            quiet = 0;
        }
    }

    /// Stops evaluations past their limit; returns whether any is running, the evaluations
    /// started so far, and how long to wait before the next look.
    fn scan(&self) -> (bool, u64, Duration) {
        let now = now();
        // Held while signalling: a slot leaves the list under this lock before its thread can
        // end, so no signal goes to a thread that is gone.
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        let mut busy = false;
        let mut evaluations = 0u64;
        let mut tick = MAX_TICK;
        for slot in slots.iter() {
            evaluations = evaluations.wrapping_add(slot.evaluations.load(Ordering::Relaxed));
            let started = slot.started.load(Ordering::SeqCst);
            let limit = slot.limit.load(Ordering::Relaxed);
            tick = tick.min(Duration::from_nanos(limit / 4));
            if started == 0 {
                continue;
            }
            busy = true;
            if now.saturating_sub(started) > limit && slot.stop.load(Ordering::SeqCst) != started {
                slot.stop.store(started, Ordering::SeqCst);
                // SAFETY: the thread is alive while its slot is listed (see above).
                unsafe { libc::pthread_kill(slot.thread, libc::SIGURG) };
            }
        }
        (busy, evaluations, tick.max(MIN_TICK))
    }
}

impl Registration {
    /// Watches `lua`, which the calling thread owns and evaluates in.
    pub(super) fn new(lua: &mlua::Lua) -> Result<Registration, String> {
        let watchdog = watchdog()?;
        let mut state = std::ptr::null_mut();
        // SAFETY: only reads the pointer of the main state, where calls from Rust run.
        unsafe { lua.exec_raw::<()>((), |raw| state = raw) }
            .map_err(|error| format!("cannot watch a Lua state: {error}"))?;
        let slot = Arc::new(Slot {
            // SAFETY: pthread_self has no preconditions.
            thread: unsafe { libc::pthread_self() },
            state: AtomicPtr::new(state),
            started: AtomicU64::new(0),
            limit: AtomicU64::new(u64::MAX),
            stop: AtomicU64::new(0),
            hooked: AtomicBool::new(false),
            evaluations: AtomicU64::new(0),
        });
        watchdog.slots.lock().unwrap_or_else(PoisonError::into_inner).push(slot.clone());
        Ok(Registration { slot })
    }

    /// Starts timing an evaluation on this thread, stopped once it runs longer than `limit`.
    pub(super) fn start(&self, limit: Duration) -> Running<'_> {
        let slot = &*self.slot;
        // Only this thread writes the counter.
        slot.evaluations.store(slot.evaluations.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        slot.limit.store(u64::try_from(limit.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
        slot.started.store(now(), Ordering::SeqCst);
        ACTIVE.with(|active| active.store(std::ptr::from_ref(slot).cast_mut(), Ordering::SeqCst));
        if let Ok(watchdog) = watchdog()
            && watchdog.idle.load(Ordering::SeqCst)
            && watchdog.idle.swap(false, Ordering::SeqCst)
            && let Some(thread) = watchdog.thread.get()
        {
            thread.unpark();
        }
        Running { slot }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Ok(watchdog) = watchdog() {
            let mut slots = watchdog.slots.lock().unwrap_or_else(PoisonError::into_inner);
            slots.retain(|slot| !Arc::ptr_eq(slot, &self.slot));
        }
    }
}

impl Running<'_> {
    /// Gives the rest of the evaluation a fresh limit and lifts a stop in progress: after a rule
    /// that ran over is recorded as failed, the rules after it still run.
    pub(super) fn restart(&self) {
        self.slot.started.store(now(), Ordering::SeqCst);
        self.slot.unhook();
    }
}

impl Slot {
    /// Removes the stop hook if the signal handler installed one.
    fn unhook(&self) {
        if self.hooked.swap(false, Ordering::SeqCst) {
            // SAFETY: the state is alive and owned by this thread, the only caller.
            unsafe { ffi::lua_sethook(self.state.load(Ordering::Relaxed), None, 0, 0) };
        }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        // After this a late signal finds nothing to stop; a stop that came after the last
        // instruction left its hook behind, which must not stop the next evaluation.
        ACTIVE.with(|active| active.store(std::ptr::null_mut(), Ordering::SeqCst));
        self.slot.started.store(0, Ordering::SeqCst);
        self.slot.unhook();
    }
}

/// SIGURG: installs the stop hook if this thread's evaluation is the one the watchdog stopped.
fn on_signal() {
    let slot = ACTIVE.with(|active| active.load(Ordering::SeqCst));
    if slot.is_null() {
        return;
    }
    // SAFETY: ACTIVE points at a live slot while its thread evaluates, and this handler runs on
    // that thread.
    let slot = unsafe { &*slot };
    let started = slot.started.load(Ordering::SeqCst);
    if started == 0 || started != slot.stop.load(Ordering::SeqCst) {
        return;
    }
    slot.hooked.store(true, Ordering::SeqCst);
    // SAFETY: the state is alive (see above); lua_sethook may be called from a signal handler
    // (see `start`).
    unsafe { ffi::lua_sethook(slot.state.load(Ordering::Relaxed), Some(stop_hook), ffi::LUA_MASKCOUNT, 1) };
}

/// Raises "time limit exceeded" at every instruction until the evaluation returns to Rust, so
/// a rule that catches the error with `pcall` cannot go on.
unsafe extern "C-unwind" fn stop_hook(state: *mut ffi::lua_State, _: *mut ffi::lua_Debug) {
    if ACTIVE.with(|active| active.load(Ordering::SeqCst)).is_null() {
        // No evaluation to stop (cannot happen: the hook goes before `ACTIVE` is cleared).
        // SAFETY: the hook's own state, on its own thread.
        unsafe { ffi::lua_sethook(state, None, 0, 0) };
        return;
    }
    // SAFETY: raising an error from a hook is allowed; it unwinds only C frames to the nearest
    // protected call, and this frame owns nothing that needs dropping.
    unsafe { ffi::luaL_error(state, TIME_LIMIT_EXCEEDED.as_ptr()) };
}
