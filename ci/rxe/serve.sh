#!/bin/sh
# The COMMAND of every guest in a session of ci/rxe/guests.sh (session
# start): runs the jobs the host posts into the control share, one after
# another, until the host asks it to stop. Lets a whole test stage share one
# boot of the guests.
#
# Protocol (files in /run/rxe, the run directory on the host), K = 1, 2, ...:
#   job.K          the job's /bin/sh script; it appears (by rename) only
#                  once job.K.where is in place
#   job.K.where    "all" (every guest runs it) or "0" (guest 0 only; the
#                  others only serve it: ssh, verbs peers)
#   job-out.K.I    guest I's output of job K (live)
#   job-rc.K.I     its exit status, written when it has ended
#   job-cancel.K   the host gave up on job K: its process group is killed
#                  (exit status 124)
#   stop           no more jobs: exit 0 (guest-init powers the guest off)
# Jobs run strictly in order in every guest, so a job never overlaps the
# previous one in any guest that runs both.
CTL=/run/rxe
BB=/bin/busybox
I=${GUEST_INDEX:?serve.sh runs inside a test-bed guest}
k=1
while :; do
    if [ -e "$CTL/job.$k" ]; then
        read -r where <"$CTL/job.$k.where"
        if [ "$where" = all ] || [ "$where" = "$I" ]; then
            # A session of its own, so that a cancel reaches every process.
            setsid /bin/sh "$CTL/job.$k" >"$CTL/job-out.$k.$I" 2>&1 </dev/null &
            pid=$!
            cancelled=0
            while kill -0 "$pid" 2>/dev/null; do
                if [ $cancelled = 0 ] && [ -e "$CTL/job-cancel.$k" ]; then
                    cancelled=1
                    kill -TERM "-$pid" 2>/dev/null
                    $BB sleep 3
                    kill -KILL "-$pid" 2>/dev/null
                fi
                $BB sleep 0.2
            done
            wait "$pid"
            rc=$?
            [ $cancelled = 0 ] || rc=124
            echo "$rc" >"$CTL/job-rc.$k.$I.tmp"
            $BB mv "$CTL/job-rc.$k.$I.tmp" "$CTL/job-rc.$k.$I"
        fi
        k=$((k + 1))
    elif [ -e "$CTL/stop" ]; then
        exit 0
    else
        $BB sleep 0.2
    fi
done
