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
