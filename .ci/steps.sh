# shellcheck shell=bash
# step <name> <allowance in minutes> <make target>...: sourced by .ci/run (issue 41). Runs `make <targets>` when
# its allowance fits in what is left of CI_BUDGET_MIN (default 85 minutes, counted by bash's SECONDS from the start
# of .ci/run), under a timeout of what is left. Fails the run, naming the step, when the allowance does not fit or
# the step runs past the budget, unless CI_ALLOW_SKIP names the step (or says 'all'); skipped steps are appended
# to the array `skipped`. MAKE_CMD (default make) is for tests.
budget=${CI_BUDGET_S:-$(( ${CI_BUDGET_MIN:-85} * 60 ))}   # CI_BUDGET_S: seconds, for tests
allow_skip=" ${CI_ALLOW_SKIP:-} "
skipped=()
step() {   # step <name> <allowance in minutes> <make target>...
    local name=$1 allowance=$(( $2 * 60 )); shift 2
    local left=$(( budget - SECONDS ))
    if (( allowance > left )); then
        if [[ $allow_skip == *" $name "* || $allow_skip == *" all "* ]]; then
            echo "== SKIPPED (CI_ALLOW_SKIP names it): make $* ($((SECONDS / 60)) min used; it needs up to $((allowance / 60)) min of the ${CI_BUDGET_MIN:-85})"
            skipped+=("$name")
            return
        fi
        echo "== FAIL: make $* cannot fit: $((SECONDS / 60)) min used, it needs up to $((allowance / 60)) min and $((left / 60)) min of the ${CI_BUDGET_MIN:-85}-minute budget are left." >&2
        echo "   A step that does not run is not a passed step. To skip it knowingly: CI_ALLOW_SKIP='$name' bash .ci/run" >&2
        exit 1
    fi
    echo "== make $*"
    local start=$SECONDS rc=0
    # the step may run at most what is left of the budget: past it, CI fails here with the step's name instead of
    # being stopped at 90 minutes with nothing said
    timeout --foreground --kill-after=30 "$left" ${MAKE_CMD:-make} "$@" || rc=$?
    if (( rc == 124 || rc == 137 )); then
        echo "== FAIL: make $* ran past the ${CI_BUDGET_MIN:-85}-minute budget (stopped after $((SECONDS - start)) s)" >&2
        exit 1
    elif (( rc != 0 )); then
        echo "== FAIL: make $* exited $rc" >&2
        exit "$rc"
    fi
    echo "== make $* took $((SECONDS - start)) s"
}

# await_built <item>...: wait for the background builds of .ci/prebuild.sh (PREBUILD_DIR, default build/prebuild)
# named, until each has written <item>.done or <item>.failed, or the background job (its pids in prebuild_pids)
# has ended. Waiting counts against the budget: past it, the run fails naming what it waited for. A failed item
# is only said here: the step's own make target builds it again and fails with the real error.
await_built() {
    local dir=${PREBUILD_DIR:-build/prebuild} start=$SECONDS n alive p
    for n in "$@"; do
        while [[ ! -e $dir/$n.done && ! -e $dir/$n.failed ]]; do
            alive=0
            for p in ${prebuild_pids:-}; do kill -0 "$p" 2>/dev/null && alive=1; done
            (( alive )) || break
            if (( SECONDS >= budget )); then
                echo "== FAIL: still waiting for the background build of $n at the end of the ${CI_BUDGET_MIN:-85}-minute budget ($dir/$n.log)" >&2
                exit 1
            fi
            sleep 2
        done
        if [[ -e $dir/$n.failed ]]; then
            echo "== the background build of $n failed ($dir/$n.log): the step builds it again"
        fi
    done
    echo "== waited $((SECONDS - start)) s for the background builds of: $*"
}
