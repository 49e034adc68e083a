#!/usr/bin/env bash
# Progress lines for scripts/setup.sh (sourced by it): a long step says, every 30 s, how long it
# has been running, so that a slow download does not look like a hang.

# Runs "$@" in the background and waits for it, printing "setup: still <$1> (M min S s so far)"
# every SETUP_PROGRESS_EVERY_S seconds (30 by default) while it runs; returns its exit status.
with_progress() {
    local what=$1 start=$SECONDS pid status
    shift
    "$@" &
    pid=$!
    while ! wait_up_to "${SETUP_PROGRESS_EVERY_S:-30}" "$pid"; do
        echo "setup: still $what ($(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s so far)"
    done
    status=0
    wait "$pid" || status=$?
    return "$status"
}

# True once process $2 has ended, false after $1 seconds if it is still running.
wait_up_to() {
    local deadline=$(( SECONDS + $1 ))
    while kill -0 "$2" 2>/dev/null; do
        [ "$SECONDS" -ge "$deadline" ] && return 1
        sleep 1
    done
    return 0
}

