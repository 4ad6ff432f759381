# ctypes_check LIB ENV...: ctypes.CDLL of LIB from a fresh python3, run
# under ENV... (a command prefix that clears the environment variables a
# dlopen could lean on): plain, and before and after importing numpy
# (tests/dist/ctypes_host.py). Each interpreter tried is `python3` on PATH
# and Debian's /usr/bin/python3 (where tools/setup.sh installs
# python3-numpy); a numpy case runs wherever numpy imports and counts as a
# check only there -- but at least one interpreter must have run it when
# Debian's python3-numpy is installed. Sourced by exports_test.sh (the
# built library) and scripts_check.sh (the installed one); uses their
# ok/fail functions and $work.
ctypes_check() {
    local lib=$1 py mode rc numpy_ran=0
    shift
    local host
    host=$(dirname "${BASH_SOURCE[0]}")/ctypes_host.py
    local -A seen=()
    for py in "$(command -v python3 || true)" /usr/bin/python3; do
        [ -x "$py" ] || continue
        local real
        real=$(readlink -f "$py")
        [ -z "${seen[$real]:-}" ] || continue
        seen[$real]=1
        for mode in plain numpy-before numpy-after; do
            rc=0
            "$@" "$py" "$host" "$lib" "$mode" >"$work/ctypes.txt" 2>&1 || rc=$?
            if [ "$rc" -eq 3 ] && [ "$mode" != plain ]; then
                continue # no numpy for this interpreter
            fi
            [ "$rc" -eq 0 ] || fail "$py ctypes_host.py $mode: $(cat "$work/ctypes.txt")"
            [ "$mode" = plain ] || numpy_ran=1
            ok "$(cat "$work/ctypes.txt")"
        done
    done
    if [ "$numpy_ran" -eq 0 ]; then
        if dpkg-query -W -f='${Status}' python3-numpy 2>/dev/null | grep -q "install ok installed"; then
            fail "python3-numpy is installed, yet no interpreter imported numpy"
        fi
        echo "  skip: ctypes.CDLL beside numpy: no python3 here imports numpy (tools/setup.sh installs python3-numpy)"
    fi
}
