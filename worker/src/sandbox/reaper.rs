//! Every process a job starts dies when the job ends. A process group is not enough: a test
//! can leave it (`setsid sleep 97 &`) or leave its parent (a double fork), and the kernel then
//! hands the orphan to init, outside any group the worker could kill.
//!
//! So the sandbox's child is a per-job reaper, not the command: between fork and exec it marks
//! itself a child subreaper (`PR_SET_CHILD_SUBREAPER`), forks the command, and waits. Whatever
//! the command's processes do to their session, group or parent, they stay the reaper's
//! descendants: an orphan is re-parented to the reaper, not to init. When the command exits, or
//! when the worker sends `SIGTERM` (the timeout, a cancelled job, the worker going away), the
//! reaper kills its children until none is left, then exits with the command's status.
//!
//! The reaper is a fork of the multi-threaded worker that never execs, so it makes only
//! async-signal-safe calls: no allocation, no locks, nothing of the standard library beyond
//! what lowers to a system call.

use std::sync::atomic::{AtomicBool, Ordering};

/// `CAP_SYS_PTRACE` from `<linux/capability.h>`.
const CAP_SYS_PTRACE: libc::c_ulong = 19;

/// Set by the reaper's `SIGTERM` handler: stop the job now.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// The `pre_exec` hook: returns in the command's process (which then execs) and never in the
/// reaper's.
///
/// # Safety
/// Only to be called between fork and exec, as `Command::pre_exec` does.
pub(super) unsafe fn become_reaper() -> std::io::Result<()> {
    // SAFETY: system calls on this process only, made in the forked child before exec.
    unsafe {
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // The worker's death (or the death of the thread that spawned the job) stops the job.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0);
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_stop as extern "C" fn(libc::c_int) as usize;
        // No SA_RESTART: a blocked waitpid returns EINTR, so the stop is seen at once.
        action.sa_flags = 0;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut());
        let command = libc::fork();
        if command < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if command == 0 {
            // The command's process: exec resets the handler; fork cleared the subreaper mark
            // and the death signal. A job run as root must not be able to trace the worker or
            // read its memory and environment past the worker's non-dumpable mark; failing
            // here (no CAP_SETPCAP) means the job has no such capability to drop.
            libc::prctl(libc::PR_CAPBSET_DROP, CAP_SYS_PTRACE, 0, 0, 0);
            return Ok(());
        }
        reap(command)
    }
}

/// The reaper's life: wait for the command, sweep, exit as the command did.
unsafe fn reap(command: libc::pid_t) -> ! {
    // SAFETY: async-signal-safe system calls only (see the module comment).
    unsafe {
        close_every_fd();
        let mut status: libc::c_int = 0;
        let mut command_status = None;
        while !STOP.load(Ordering::SeqCst) {
            let mut reaped: libc::c_int = 0;
            let pid = libc::waitpid(-1, &mut reaped, 0);
            if pid == command {
                status = reaped;
                command_status = Some(reaped);
                break;
            }
            if pid < 0 && errno() != libc::EINTR {
                break;
            }
        }
        sweep();
        match command_status {
            Some(_) if libc::WIFEXITED(status) => libc::_exit(libc::WEXITSTATUS(status)),
            Some(_) if libc::WIFSIGNALED(status) => {
                // Die of the same signal, so the worker sees what the command saw.
                let signal = libc::WTERMSIG(status);
                let mut no_core: libc::rlimit = std::mem::zeroed();
                no_core.rlim_cur = 0;
                no_core.rlim_max = 0;
                libc::setrlimit(libc::RLIMIT_CORE, &no_core);
                libc::signal(signal, libc::SIG_DFL);
                libc::kill(libc::getpid(), signal);
                libc::_exit(128 + signal)
            }
            // Stopped by the worker before the command ended.
            _ => libc::_exit(128 + libc::SIGKILL),
        }
    }
}

/// Kills every child (and the group each one leads) until none is left. A killed child's own
/// children are re-parented here, so the next round finds them.
unsafe fn sweep() {
    // SAFETY: async-signal-safe system calls only.
    unsafe {
        loop {
            for_each_child(|pid| {
                libc::kill(pid, libc::SIGKILL);
                libc::kill(-pid, libc::SIGKILL);
            });
            let mut reaped: libc::c_int = 0;
            loop {
                let pid = libc::waitpid(-1, &mut reaped, libc::WNOHANG);
                if pid > 0 {
                    continue;
                }
                if pid < 0 && errno() == libc::ECHILD {
                    return;
                }
                break;
            }
            // Children are dying but not yet reapable: look again in a moment.
            let pause = libc::timespec {
                tv_sec: 0,
                tv_nsec: 1_000_000,
            };
            libc::nanosleep(&pause, std::ptr::null_mut());
        }
    }
}

/// Calls `f` with each pid in `/proc/thread-self/children` (the reaper has one thread).
unsafe fn for_each_child(mut f: impl FnMut(libc::pid_t)) {
    // SAFETY: open/read/close on a buffer on the stack.
    unsafe {
        let fd = libc::open(
            c"/proc/thread-self/children".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return;
        }
        let mut buf = [0u8; 4096];
        let mut pid: libc::pid_t = 0;
        let mut digits = false;
        loop {
            let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
            if n <= 0 {
                break;
            }
            for &byte in &buf[..n as usize] {
                if byte.is_ascii_digit() {
                    pid = pid
                        .saturating_mul(10)
                        .saturating_add(libc::pid_t::from(byte - b'0'));
                    digits = true;
                } else {
                    if digits && pid > 0 {
                        f(pid);
                    }
                    pid = 0;
                    digits = false;
                }
            }
        }
        if digits && pid > 0 {
            f(pid);
        }
        libc::close(fd);
    }
}

/// The reaper holds copies of the worker's descriptors (sockets, the spawn's error pipe, the
/// job's output files): the spawning thread would wait on that pipe until the reaper exits.
unsafe fn close_every_fd() {
    // SAFETY: closing descriptors of this process only.
    unsafe {
        if libc::syscall(libc::SYS_close_range, 0, libc::c_uint::MAX, 0) == 0 {
            return;
        }
        let max = libc::sysconf(libc::_SC_OPEN_MAX).clamp(1024, 65_536) as libc::c_int;
        for fd in 0..max {
            libc::close(fd);
        }
    }
}

fn errno() -> libc::c_int {
    // SAFETY: reads this thread's errno.
    unsafe { *libc::__errno_location() }
}
