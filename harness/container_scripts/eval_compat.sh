# Put before a SWE-bench 5.0 row's eval script in the grading sandbox (harness.evaluation.eval_scripts):
# the script was written for the official image, and each function below stands in for something that
# image has and the offline environment image has not, saying on the log what it did instead:
#   source /opt/miniconda3/bin/activate, conda activate   nothing: the environment's venv is first on PATH
#   cd /testbed                                           cd $HARNESS_WORKDIR, where the project is
#   git checkout <base commit> FILES                      FILES put back from grading's baseline (the
#                                                         test patch's files; the tree has no history)
#   git status, git show, git diff                        skipped (informational; no history)
#   python -m pip install ..., pip install ...,           skipped: the project and its dependencies are
#   python setup.py install|develop                       installed in the image, and there is no network
#   locale-gen, sed ... /etc/locale.gen                   skipped: the offline images have C.UTF-8 only
#   export NAME=en_US.UTF-8                               export NAME=C.UTF-8
# Every other command, the test command included, runs as the script wrote it. The functions turn the
# script's tracing (set -x) off inside themselves, so the log shows the script's own lines.
# Set by harness.evaluation.grading: HARNESS_STAGE, HARNESS_WORKDIR, HARNESS_BASE_COMMIT,
# HARNESS_ROW_IMAGE, HARNESS_IMAGE.

harness_note() { printf 'harness: %s\n' "$*"; }

harness_note "running the row's eval_script on the offline environment image ${HARNESS_IMAGE:-?}; the" \
    "row names the image ${HARNESS_ROW_IMAGE:-(none)}, which is not pulled"

conda() {
    { local -; set +x; } 2>/dev/null
    return 0
}

source() {
    { local -; set +x; } 2>/dev/null
    if [ "${1:-}" = /opt/miniconda3/bin/activate ]; then return 0; fi
    builtin source "$@"
}

cd() {
    { local -; set +x; } 2>/dev/null
    if [ "$#" -eq 1 ] && [ "$1" = /testbed ]; then builtin cd "$HARNESS_WORKDIR"; return; fi
    builtin cd "$@"
}

harness_is_base() {
    [ -n "${HARNESS_BASE_COMMIT:-}" ] && [ "${#1}" -ge 7 ] || return 1
    case "$HARNESS_BASE_COMMIT" in "$1"*) return 0 ;; *) return 1 ;; esac
}

git() {
    { local -; set +x; } 2>/dev/null
    local at=1 sub=""
    while [ "$at" -le "$#" ]; do
        case "${!at}" in -c) at=$((at + 2)) ;; *) sub=${!at}; break ;; esac
    done
    case "$sub" in
        status | show | diff)
            harness_note "skipped \`git $*\`: the grading sandbox's tree is the base commit's files, without history"
            return 0 ;;
        checkout)
            if [ "$at" -eq 1 ] && [ "$#" -ge 3 ] && harness_is_base "$2"; then
                shift 2
                command python3 "$HARNESS_STAGE/eval_checkout.py" "$HARNESS_STAGE" "$@" || return 1
                GIT_DIR="$HARNESS_STAGE/base.git" GIT_WORK_TREE="$HARNESS_WORKDIR" GIT_LITERAL_PATHSPECS=1 \
                    command python3 "$HARNESS_STAGE/restore.py" "$HARNESS_STAGE/checkout.json"
                return
            fi ;;
    esac
    command git "$@"
}

harness_install() {
    harness_note "skipped \`$*\`: the project and its dependencies are installed in the environment image" \
        "(offline: nothing is fetched or reinstalled)"
}

harness_python() {
    local name=$1
    shift
    if [ "${1:-}" = -m ] && [ "${2:-}" = pip ] && [ "${3:-}" = install ]; then harness_install "$name" "$@"; return 0; fi
    if [ "${1:-}" = setup.py ] && { [ "${2:-}" = install ] || [ "${2:-}" = develop ]; }; then
        harness_install "$name" "$@"
        return 0
    fi
    command "$name" "$@"
}

python() {
    { local -; set +x; } 2>/dev/null
    harness_python python "$@"
}

python3() {
    { local -; set +x; } 2>/dev/null
    harness_python python3 "$@"
}

pip() {
    { local -; set +x; } 2>/dev/null
    if [ "${1:-}" = install ]; then harness_install pip "$@"; return 0; fi
    command pip "$@"
}

locale-gen() {
    { local -; set +x; } 2>/dev/null
    harness_note "skipped locale-gen: the offline image has the C.UTF-8 locale only"
    return 0
}

sed() {
    { local -; set +x; } 2>/dev/null
    if [ "$#" -ge 1 ] && [ "${!#}" = /etc/locale.gen ]; then return 0; fi
    command sed "$@"
}

export() {
    { local -; set +x; } 2>/dev/null
    local word words=()
    for word in "$@"; do
        case "$word" in
            *=en_US.UTF-8)
                word="${word%%=*}=C.UTF-8"
                harness_note "exported $word instead: the offline image has the C.UTF-8 locale only" ;;
        esac
        words+=("$word")
    done
    builtin export "${words[@]}"
}
