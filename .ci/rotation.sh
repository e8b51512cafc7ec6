# shellcheck shell=bash
# rotation.sh: sourced by .ci/run (issue 41 item 3). Rungs too long to run on every CI run within the cold budget
# (more stacks on real nodes, day two on more stacks, the planted day-two and gang boxes, 512 nodes) are split into
# a fixed rotation: .ci/rotation.tsv, one slot per line, `<allowance minutes> <name> <make arguments...>` (shell-quoted, e.g.
# STACKS="a b"). A CI run
# plays ONE slot, the slot of the commit it runs: the number of commits in its history modulo the number of slots
# (a shallow clone, whose history is cut: the commit id's first 8 hex digits instead), so N consecutive commits of
# main cover every slot once. The slot and what it runs are printed. A person picks another with
# CI_ROTATION_SLOT=<k>, or every slot, one after the other, with CI_ROTATION=all (`make rotation-all` does that
# without the rest of CI). ROTATION_FILE is for tests.
rotation_file=${ROTATION_FILE:-.ci/rotation.tsv}
rotation_slots() { grep -v '^[[:space:]]*\(#\|$\)' "$rotation_file"; }
rotation_pick() {   # prints the index of this run's slot
    local n count
    n=$(rotation_slots | wc -l)
    if [ -n "${CI_ROTATION_SLOT:-}" ]; then
        if ! [[ $CI_ROTATION_SLOT =~ ^[0-9]+$ ]] || (( CI_ROTATION_SLOT >= n )); then
            echo "CI_ROTATION_SLOT=$CI_ROTATION_SLOT: a slot of .ci/rotation.tsv is 0..$((n - 1))" >&2
            return 2
        fi
        echo "$CI_ROTATION_SLOT"
    elif [ "$(git rev-parse --is-shallow-repository 2>/dev/null)" = false ]; then
        count=$(git rev-list --count HEAD)
        echo $(( count % n ))
    else
        count=$(git rev-parse HEAD 2>/dev/null | cut -c1-8)
        echo $(( 16#${count:-0} % n ))
    fi
}
# run_rotation: step() each slot this run plays (the `rotation-<name>` step, its allowance from the file)
run_rotation() {
    local n k line allowance name
    n=$(rotation_slots | wc -l)
    if [ "${CI_ROTATION:-}" = all ]; then
        echo "== rotation: every slot (CI_ROTATION=all), $n of $n"
        while read -r allowance name line; do
            eval "step \"rotation-\$name\" \"\$allowance\" $line"   # $line: make arguments, quoted as in the file
        done < <(rotation_slots)
        return
    fi
    k=$(rotation_pick) || exit 2
    read -r allowance name line < <(rotation_slots | sed -n "$((k + 1))p")
    echo "== rotation: slot $k of $n ($name: make $line); the other slots run on the next commits (.ci/rotation.tsv)"
    eval "step \"rotation-\$name\" \"\$allowance\" $line"
}
# run_rotation_more: called by .ci/run once cluster-check and the lane have passed. The slots after this run's own
# (k+1, k+2, ... modulo n), one after the other, each only while it still fits in the first CI_ROTATION_UNTIL_MIN
# minutes of the run (default 50, well inside the 85-minute budget): in order, stopping at the first that does not
# fit, so a warm run (~40 min) plays one or two more and a cold one none; what was played and what is left for later
# commits is printed. Each is a step(): a failing slot fails the run. Not when a person chose the slot
# (CI_ROTATION_SLOT) or every slot ran (CI_ROTATION=all); CI_ROTATION_MORE=0 turns it off.
run_rotation_more() {
    local n k i j allowance name line until=$(( ${CI_ROTATION_UNTIL_MIN:-50} * 60 )) played=() later=()
    if [ "${CI_ROTATION:-}" = all ] || [ -n "${CI_ROTATION_SLOT:-}" ] || [ "${CI_ROTATION_MORE:-1}" = 0 ]; then
        echo "== rotation: no further slots this run (CI_ROTATION=${CI_ROTATION:-} CI_ROTATION_SLOT=${CI_ROTATION_SLOT:-} CI_ROTATION_MORE=${CI_ROTATION_MORE:-1})"
        return
    fi
    n=$(rotation_slots | wc -l)
    k=$(rotation_pick) || exit 2
    for (( i = 1; i < n; i++ )); do
        j=$(( (k + i) % n ))
        read -r allowance name line < <(rotation_slots | sed -n "$((j + 1))p")
        if (( ${#later[@]} == 0 && SECONDS + allowance * 60 <= until )); then
            echo "== rotation: slot $j of $n too ($name: make $line): $((SECONDS / 60)) min used, it needs up to $allowance of the first ${CI_ROTATION_UNTIL_MIN:-50}"
            eval "step \"rotation-\$name\" \"\$allowance\" $line"
            played+=("$name")
        else
            later+=("$name")
        fi
    done
    echo "== rotation: further slots played this run: ${played[*]:-none}; left to later commits: ${later[*]:-none}"
}
