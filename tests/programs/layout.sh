# layout.sh: the rules of the house (README.md, "Layout"), checked by grep on
# the sources, so a change that breaks one fails here, naming the file and line:
#   includes_name_the_folder  every #include "..." of lib/ or sim/ names its folder
#                             ("dataset/dataset.h"), and exists
#   stage_order               a stage folder never includes a later stage's header
#                             (base, dataset, sampler, loader, transfer, comm, ddp)
#   one_backend_table         in lib/, only lib/backend_table.c includes sim/ or a
#                             backend folder's header (*/mpi/, */nccl/, */cuda/);
#                             a backend folder may include its own and other backends'
#   vendor_headers            MPI headers only under */mpi/ and in the MPI backend's own
#                             unit test (tests/unit/test_*_mpi.c: it wraps MPI's calls through
#                             the profiling interface); CUDA, NCCL and cuBLAS headers only in
#                             backend folders (*/cuda/, */nccl/) and .cu files
#   unique_basenames          no two files of lib/ and sim/ share a name (the module
#                             prefix keeps them apart; labs/lab.sh finds modules by it)
#   stage_readmes             each stage folder has a README.md, or every file in it
#                             opens with a header comment
#   header_comments           every source file opens with a comment
#   chapter_calls_one_way     a chapter's files call each other one way: none
#                             calls a function main.c defines, and no two call
#                             each other, directly or round a longer circle
#   project_words             comments and READMEs speak of the project only
#   layout_block_names_the_tree  README.md's Layout block names every file each
#                             chapter folder has, every folder of lib/ and tests/
# ROOT names the tree to check (default: this repository), so the rules can be
# tried on a copy with a rule broken on purpose.
. "$(dirname "$0")/../harness/lib.sh"
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$ROOT" || exit 1

STAGES=(base dataset sampler loader transfer comm ddp)
stage_rank() { # stage name -> its position in the data flow, or empty
    local i
    for i in "${!STAGES[@]}"; do [ "${STAGES[$i]}" = "$1" ] && { echo "$i"; return; }; done
}
is_backend_path() { [[ /$1 == */mpi/* || /$1 == */nccl/* || /$1 == */cuda/* ]]; }

# The sources to check: what git tracks (a checkout) or, failing that, every file.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t sources < <(git ls-files --cached --others --exclude-standard -- '*.c' '*.h' '*.cu' | grep -v '^build/')
    mapfile -t texts < <(git ls-files --cached --others --exclude-standard -- '*.c' '*.h' '*.cu' '*.md' '*.sh' '*.py' \
        '*.gp' '*.awk' 'Makefile' 'mk/*' '.ci/*' 'tests/run' | grep -v '^build/')
else
    mapfile -t sources < <(find lib sim chapters labs tests -name '*.[ch]' -o -name '*.cu' | sort)
    mapfile -t texts < <(find . -path ./build -prune -o -type f \( -name '*.[ch]' -o -name '*.cu' -o -name '*.md' \
        -o -name '*.sh' -o -name '*.py' -o -name '*.gp' -o -name '*.awk' -o -name Makefile \) -print | sed 's|^\./||')
fi

# "file:line:header" for every quoted include of the given files
quoted_includes() { grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$@" 2>/dev/null |
    sed -E 's/^([^:]*):([0-9]*):.*#[[:space:]]*include[[:space:]]*"([^"]*)".*/\1:\2:\3/'; }

verdict() { # NAME PROBLEMS
    if [ -z "$2" ]; then t_pass "$1"; else t_failed "$1" "$(head -n 8 <<<"$2" | tr '\n' ';')"; fi
}

core=(); for f in "${sources[@]}"; do [[ $f == lib/* || $f == sim/* ]] && core+=("$f"); done

# ---- includes name the folder ------------------------------------------------------
problems=""
while IFS=: read -r file line hdr; do
    [ -n "$file" ] || continue
    dir=$(dirname "$file")
    if [[ $file == lib/* || $file == sim/* ]]; then
        # lib/ and sim/: "folder/name.h" under lib/ or the root, or a header of lib/'s own top level
        if [[ $hdr != */* ]]; then
            [ -f "lib/$hdr" ] || problems+="$file:$line: \"$hdr\" does not name its folder"$'\n'
        elif [ ! -f "lib/$hdr" ] && [ ! -f "$hdr" ]; then
            problems+="$file:$line: \"$hdr\" is neither lib/$hdr nor ./$hdr"$'\n'
        fi
    elif [[ $hdr != */* ]]; then
        # elsewhere a bare name is the includer's own neighbour, the test and lab harness, or
        # lib/'s top level (backend_table.h); never a stage's module
        if [ ! -f "$dir/$hdr" ] && [ ! -f "tests/harness/$hdr" ] && [ ! -f "labs/$hdr" ] && [ ! -f "lib/$hdr" ]; then
            problems+="$file:$line: \"$hdr\" is not beside it; a module's header names its folder"$'\n'
        fi
    elif [ ! -f "lib/$hdr" ] && [ ! -f "$hdr" ] && [ ! -f "$dir/$hdr" ]; then
        problems+="$file:$line: \"$hdr\" does not exist under lib/ or the root"$'\n'
    fi
done < <(quoted_includes "${sources[@]}")
verdict includes_name_the_folder "$problems"

# ---- a stage never includes a later stage ------------------------------------------
problems=""
while IFS=: read -r file line hdr; do
    [[ $file == lib/*/* ]] || continue
    own=$(cut -d/ -f2 <<<"$file"); other=${hdr%%/*}
    r_own=$(stage_rank "$own"); r_other=$(stage_rank "$other")
    [ -n "$r_own" ] || { problems+="$file: lib/$own is not a stage (${STAGES[*]})"$'\n'; continue; }
    if [ -n "$r_other" ] && [ "$r_other" -gt "$r_own" ]; then
        problems+="$file:$line: the $own stage includes \"$hdr\" of the later $other stage"$'\n'
    fi
done < <(quoted_includes "${core[@]}")
verdict stage_order "$problems"

# ---- one file connects lib/ to sim/ and the backends ---------------------------------
problems=""
while IFS=: read -r file line hdr; do
    [[ $file == lib/* ]] || continue
    [ "$file" = lib/backend_table.c ] && continue
    is_backend_path "$file" && continue # a backend may include its own and other backends' headers
    if [[ $hdr == sim/* ]] || is_backend_path "$hdr"; then
        problems+="$file:$line: includes \"$hdr\": only lib/backend_table.c connects lib/ to sim/ and the backends"$'\n'
    fi
done < <(quoted_includes "${core[@]}")
verdict one_backend_table "$problems"

# ---- MPI, CUDA, NCCL, cuBLAS headers only in backend folders ------------------------
problems=""
while IFS=: read -r file line hdr; do
    [ -n "$file" ] || continue
    case $hdr in
    mpi.h|mpi_*.h|openmpi/*)
        [[ /$file == */mpi/* || $file == tests/unit/test_*_mpi.c ]] || problems+="$file:$line: <$hdr> outside an */mpi/ folder"$'\n' ;;
    cuda*.h|cuda/*|nccl*.h|cublas*.h|cudart*.h|curand*.h|nvml.h|driver_types.h)
        [[ $file == *.cu || /$file == */cuda/* || /$file == */nccl/* ]] ||
            problems+="$file:$line: <$hdr> outside a .cu file or a backend folder"$'\n' ;;
    esac
done < <(grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*<' "${sources[@]}" 2>/dev/null |
    sed -E 's/^([^:]*):([0-9]*):.*#[[:space:]]*include[[:space:]]*<([^>]*)>.*/\1:\2:\3/')
verdict vendor_headers "$problems"

# ---- unique basenames ----------------------------------------------------------------
dups=$(for f in "${core[@]}"; do basename "$f"; done | sort | uniq -d)
problems=""
for d in $dups; do
    problems+="$d: $(for f in "${core[@]}"; do [ "$(basename "$f")" = "$d" ] && printf '%s ' "$f"; done)"$'\n'
done
verdict unique_basenames "$problems"

# ---- each stage folder says what it is ------------------------------------------------
opens_with_comment() { # file: its first non-blank line starts a comment
    awk 'NF { exit !($1 ~ /^\/[*\/]/) } END { }' "$1"
}
problems=""
for dir in lib/*/ sim/; do
    dir=${dir%/}
    [ -d "$dir" ] || continue
    [ -f "$dir/README.md" ] && continue
    for f in "$dir"/*.[ch] "$dir"/*.cu; do
        [ -f "$f" ] || continue
        opens_with_comment "$f" || { problems+="$dir: no README.md, and $f opens without a comment"$'\n'; break; }
    done
done
verdict stage_readmes "$problems"

problems=""
for f in "${sources[@]}"; do
    [[ $f == tests/fuzz/seeds/* ]] && continue
    opens_with_comment "$f" || problems+="$f: opens without a comment saying what it is"$'\n'
done
verdict header_comments "$problems"

# ---- a chapter's files call one way ------------------------------------------------------
# main.c parses and dispatches; the files it dispatches to call only files
# below them. The edges are "A B": A calls a function B defines (not static),
# read from the code with the comments taken out (gcc -fpreprocessed), and
# tsort finds any circle among them.
chapter_code() { gcc -fpreprocessed -E -P "$1" 2>/dev/null; }
problems=""
for dir in chapters/*/; do
    dir=${dir%/}
    files=("$dir"/*.c)
    [ -f "${files[0]}" ] || continue
    declare -A defined_in=()
    for f in "${files[@]}"; do
        while read -r name; do
            [ "$name" = main ] || defined_in[$name]=$f
        done < <(chapter_code "$f" | grep -E '^[A-Za-z_][A-Za-z0-9_ *]*[ *][A-Za-z_][A-Za-z0-9_]*\(' |
            grep -vE '^(static|typedef|extern)\b|;[[:space:]]*$' | sed -E 's/^[^(]*[ *]([A-Za-z_][A-Za-z0-9_]*)\(.*/\1/')
    done
    edges=""
    for f in "${files[@]}"; do
        code=$(chapter_code "$f")
        for name in "${!defined_in[@]}"; do
            callee=${defined_in[$name]}
            [ "$callee" != "$f" ] && grep -qE "\b$name[[:space:]]*\(" <<<"$code" || continue
            edges+="$f $callee"$'\n'
            [ "$(basename "$callee")" = main.c ] &&
                problems+="$f calls $name(), which $callee defines: what the files share goes in a file of its own"$'\n'
        done
    done
    unset defined_in
    if ! loop=$(printf '%s' "$edges" | sort -u | tsort 2>&1 >/dev/null) || [ -n "$loop" ]; then
        problems+="$dir: its files call each other in a circle: $(grep -v 'input contains a loop' <<<"$loop" |
            sed 's/^tsort: //' | tr '\n' ' ')"$'\n'
    fi
done
verdict chapter_calls_one_way "$problems"

# ---- the Layout block names the tree ----------------------------------------------------
# README.md's map of the tree: the entry of a top-level path (its line and the indented
# lines under it) names each file every chapter folder has (a convention the tools find by
# name) and each folder of lib/ and tests/ (as "name/").
layout=$(awk '/^## Layout/ { on = 1 } on && /^```/ { if (++fences == 2) exit; next } on && fences == 1' README.md)
layout_entry() { awk -v top="$1" 'index($0, top) == 1 { on = 1; print; next } on && /^ / { print; next } { on = 0 }' <<<"$layout"; }
problems=""
chapter_dirs=(chapters/[0-9][0-9]-*/)
entry=$(layout_entry chapters/)
while read -r name; do
    grep -qF "$name" <<<"$entry" || problems+="README.md, Layout: chapters/NN-name/ does not name $name, which every chapter has"$'\n'
done < <(for d in "${chapter_dirs[@]}"; do ls "$d"; done | sort | uniq -c | awk -v n=${#chapter_dirs[@]} '$1 == n { print $2 }')
for top in lib tests; do
    entry=$(layout_entry "$top/")
    for d in "$top"/*/; do
        name=$(basename "$d")
        grep -qE "(^|[ (])$name/" <<<"$entry" || problems+="README.md, Layout: $top/ does not name its folder $name/"$'\n'
    done
done
verdict layout_block_names_the_tree "$problems"

# ---- the project's words ----------------------------------------------------------------
# what a reader of the project cannot look up: the tracker's numbers, the
# people and rounds behind a change (a verb, "never issues collective #4",
# and MPI's own sessions are the project's words and pass)
problems=$(grep -nHiE "(\bissue ?#?[0-9]|\bthe issue('s)?\b|\bthis issue\b|auditor|\bsession [0-9]|\bthis session\b|\bthe seeds\b|\bseeds' |the lead's)" \
    "${texts[@]}" 2>/dev/null | grep -v '^tests/programs/layout.sh:')
verdict project_words "$problems"
