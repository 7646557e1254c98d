//! Map reads that do not cost the programs their runs.
//!
//! While a process reads or writes a BPF map through the bpf(2) syscall, the kernel holds its
//! CPU's `bpf_prog_active` raised (bpf_disable_instrumentation), with migration disabled but
//! preemption allowed. A tracepoint or kprobe program that fires on that CPU meanwhile is not
//! run: the kernel counts it in the program's `recursion_misses` and the event is lost. On a
//! kernel that preempts readily (Debian's 7.x: PREEMPT_LAZY) a map read preempted by the very
//! processes being counted lost 1 to 3 of 10,159 node reads of short-lived processes (the VM
//! test's churn phase). Raised to SCHED_FIFO for the reads, this thread is not preempted by
//! ordinary tasks, so none of them can fire a program in that window on its CPU.
use std::io;

/// The lowest real-time priority: above every ordinary task, below every real-time one.
const PRIORITY: libc::c_int = 1;

/// While alive, the calling thread runs SCHED_FIFO at [`PRIORITY`]; dropped, it runs as
/// before. Where the kernel refuses (no CAP_SYS_NICE), nothing changes: the programs' skipped
/// runs are then counted and said at the end of the run.
pub(crate) struct Unpreempted {
    previous: Option<(libc::c_int, libc::sched_param)>,
}

impl Unpreempted {
    pub(crate) fn enter() -> Unpreempted {
        Unpreempted {
            previous: raise().ok(),
        }
    }
}

fn raise() -> io::Result<(libc::c_int, libc::sched_param)> {
    let mut previous = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; no pointer is passed.
    let policy = unsafe { libc::sched_getscheduler(0) };
    // SAFETY: pid 0 is the calling thread; the out-parameter is a valid sched_param.
    if policy < 0 || unsafe { libc::sched_getparam(0, &mut previous) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if policy == libc::SCHED_FIFO || policy == libc::SCHED_RR {
        // Real-time already (an operator's choice): left as it is.
        return Err(io::Error::from(io::ErrorKind::AlreadyExists));
    }
    let fifo = libc::sched_param {
        sched_priority: PRIORITY,
    };
    // SAFETY: pid 0 is the calling thread; the parameter is a valid sched_param.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &fifo) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((policy, previous))
}

impl Drop for Unpreempted {
    fn drop(&mut self) {
        if let Some((policy, param)) = self.previous.take() {
            // SAFETY: pid 0 is the calling thread; policy and parameter are what it had.
            if unsafe { libc::sched_setscheduler(0, policy, &param) } != 0 {
                log::warn!(
                    "putting this thread's scheduling back: {}",
                    io::Error::last_os_error()
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_runs_fifo_inside_and_as_before_after() {
        let policy = || {
            // SAFETY: pid 0 is the calling thread; no pointer is passed.
            unsafe { libc::sched_getscheduler(0) }
        };
        let before = policy();
        {
            let guard = Unpreempted::enter();
            let inside = policy();
            if guard.previous.is_some() {
                assert_eq!(inside, libc::SCHED_FIFO);
            } else {
                assert_eq!(inside, before, "refused: nothing changed");
            }
        }
        assert_eq!(policy(), before);
    }
}
