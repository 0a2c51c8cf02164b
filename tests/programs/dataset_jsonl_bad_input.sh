# dataset_jsonl_bad_input: every bad JSONL input through build/chapter-1, the
# way a user meets it: exit 1 with "chapter-1: --data: <file>: <where>: <what>"
# (the flag named where opening the file refuses it), never a crash, and the
# data files never touched. Also the odd-but-valid inputs
# (CRLF, blank lines, no final newline) and the sidecar index's failure modes
# (another file's index, a truncated one, a damaged one).
. "$(dirname "$0")/../harness/lib.sh"

ch1="$BUILD/chapter-1"
d="$T_TMP"

printf '{"num_tokens":3,"text":"a b c"}\n\n{"num_tokens":2,"text":"d e"}\r\n{"num_tokens":1,"text":"f"}' > "$d/good.jsonl"
printf '{"num_tokens":1}\n\n{"num_tokens":2,}\n' > "$d/badline.jsonl"
printf '{"num_tokens":1}\n{"tokens":2}\n' > "$d/nofield.jsonl"
printf '{"num_tokens":"many"}\n' > "$d/notint.jsonl"
: > "$d/empty.jsonl"
printf '\n\r\n  \n' > "$d/blank.jsonl"
mkdir "$d/dir.jsonl"
printf '{"other":1}\n{"other":2}\n{"other":3}\n{"other":4}\n' > "$d/other.jsonl"
printf '{"num_tokens":9,"text":"second shard"}\n' > "$d/second.jsonl"
printf '{"ok":1}\n' > "$d/random.jsonl"; head -c 3000 /dev/urandom | tr -d '\n' >> "$d/random.jsonl"
printf '{"ok":1}\n\0\0\0\0\n' > "$d/nul.jsonl"
printf '{"ok":1}\n{"text":"caf\xe9"}\n' > "$d/latin1.jsonl"
printf '{"ok":1}\n{"ok":2}\n{"text":"a record cut in the mid' > "$d/cut.jsonl"
sums() { sha256sum "$d"/*.jsonl 2>/dev/null; }
before=$(sums)

# Valid: CRLF, a blank line and no final newline give three records.
t_out good_check "check:" "$ch1" --data="$d/good.jsonl" --length-field=num_tokens --check
t_out good_get_crlf '{"num_tokens":2,"text":"d e"}' "$ch1" --data="$d/good.jsonl" --get=1
t_out good_get_last_line_without_newline '{"num_tokens":1,"text":"f"}' "$ch1" --data="$d/good.jsonl" --get=2

# Invalid lines where a length field is needed: file, record, line and byte offset.
t_fail invalid_line 1 "badline.jsonl: record 1 (line 3, byte offset 18)" \
    "$ch1" --data="$d/badline.jsonl" --length-field=num_tokens --check
t_fail invalid_line_without_length_field 1 "badline.jsonl: record 1 (line 3, byte offset 18): not valid JSON" \
    "$ch1" --data="$d/badline.jsonl" --check
t_out invalid_line_still_readable '{"num_tokens":2,}' "$ch1" --data="$d/badline.jsonl" --get=1
t_fail missing_length_field 1 "nofield.jsonl: record 1 (line 2, byte offset 17): the length field is missing" \
    "$ch1" --data="$d/nofield.jsonl" --length-field=num_tokens --check
t_fail length_field_not_an_integer 1 "notint.jsonl: record 0 (line 1, byte offset 0): the length field is not an integer" \
    "$ch1" --data="$d/notint.jsonl" --length-field=num_tokens --check

# --check parses every record (JSON syntax, UTF-8): what is not JSON is named
# by file, record, line and byte offset, whether a length field is given or not.
t_fail check_random_bytes 1 "random.jsonl: record 1 (line 2, byte offset 9): not valid JSON" "$ch1" --data="$d/random.jsonl" --check
t_fail check_nul_bytes 1 "nul.jsonl: record 1 (line 2, byte offset 9): not valid JSON" "$ch1" --data="$d/nul.jsonl" --check
t_fail check_invalid_utf8 1 "latin1.jsonl: record 1 (line 2, byte offset 9): not valid JSON: unable to decode byte 0xe9" \
    "$ch1" --data="$d/latin1.jsonl" --check
t_fail check_record_cut_mid_object 1 "cut.jsonl: record 2 (line 3, byte offset 18): not valid JSON: premature end of input" \
    "$ch1" --data="$d/cut.jsonl" --check
t_fail check_cut_with_length_field 1 "cut.jsonl: record 0 (line 1, byte offset 0): the length field is missing" \
    "$ch1" --data="$d/cut.jsonl" --length-field=num_tokens --check
t_out check_says_what_it_checked "all 3 records OK (each one JSON, in UTF-8)" "$ch1" --data="$d/good.jsonl" --check

# Files that are not JSONL data.
t_fail missing_file 1 "chapter-1: --data: $d/absent.jsonl: cannot open" "$ch1" --data="$d/absent.jsonl" --check
t_fail directory 1 "dir.jsonl: not a regular file (a directory)" "$ch1" --data="$d/dir.jsonl" --check
t_fail empty_file 1 "empty.jsonl: the file is empty" "$ch1" --data="$d/empty.jsonl" --check
t_fail only_blank_lines 1 "blank.jsonl: no records" "$ch1" --data="$d/blank.jsonl" --check

# A FIFO opened for reading waits for a writer: as data, and as the sidecar
# index left in the index's place, it must be refused or passed by at once,
# and the FIFO left as it is (the index goes to the cache directory). The
# short time limit turns a hang into a FAIL (status 124). (In their own
# directory, so that sums() never reads one.)
mkdir "$d/fifo"
mkfifo "$d/fifo/data.jsonl"
T_TIMEOUT=20 t_fail fifo_as_data 1 "data.jsonl: not a regular file (a FIFO)" "$ch1" --data="$d/fifo/data.jsonl" --check
cp "$d/good.jsonl" "$d/fifo/indexed.jsonl"
mkfifo "$d/fifo/indexed.jsonl.offsets"
T_TIMEOUT=20 t_out fifo_as_index_is_passed_by "check:" \
    env DDP_CACHE_DIR="$d/cache" "$ch1" --data="$d/fifo/indexed.jsonl" --check
if [ -p "$d/fifo/indexed.jsonl.offsets" ] && compgen -G "$d/cache/*-indexed.jsonl.offsets" > /dev/null; then
    t_pass fifo_index_left_alone
else t_failed fifo_index_left_alone "$(ls -l "$d/fifo/indexed.jsonl.offsets" "$d/cache" 2>&1)"; fi
# An index name that links to the data itself, or to another file: writing
# through the link would replace that file with the index; the index goes to
# the cache directory.
mkdir "$d/link"
cp "$d/good.jsonl" "$d/link/data.jsonl"
ln -s data.jsonl "$d/link/data.jsonl.offsets"
cp "$d/good.jsonl" "$d/link/other.jsonl"
cp "$d/good.jsonl" "$d/link/third.jsonl"
ln -s other.jsonl "$d/link/third.jsonl.offsets"
t_ok index_link_to_another_file env DDP_CACHE_DIR="$d/cache" "$ch1" --data="$d/link/third.jsonl" --get=1
if cmp -s "$d/good.jsonl" "$d/link/other.jsonl" && [ -L "$d/link/third.jsonl.offsets" ]; then
    t_pass index_link_leaves_the_other_file
else t_failed index_link_leaves_the_other_file "$(ls -lL "$d/link" 2>&1)"; fi
t_out index_link_to_the_data '{"num_tokens":2,"text":"d e"}' \
    env DDP_CACHE_DIR="$d/cache" "$ch1" --data="$d/link/data.jsonl" --get=1
if cmp -s "$d/good.jsonl" "$d/link/data.jsonl" && compgen -G "$d/cache/*-data.jsonl.offsets" > /dev/null; then
    t_pass index_link_leaves_the_data
else t_failed index_link_leaves_the_data "$(ls -lL "$d/link" "$d/cache" 2>&1)"; fi

# Indices past the end.
t_fail out_of_range 1 "record 3 is out of range (the dataset has 3 records)" "$ch1" --data="$d/good.jsonl" --get=3
t_fail out_of_range_far 1 "is out of range" "$ch1" --data="$d/good.jsonl" --get=18446744073709551615

# The sidecar index: another file's, truncated, or damaged.
t_out other_file_indexed "check:" "$ch1" --data="$d/other.jsonl" --check
cp "$d/other.jsonl.offsets" "$d/good.jsonl.offsets"
t_out foreign_index_is_rebuilt '{"num_tokens":2,"text":"d e"}' "$ch1" --data="$d/good.jsonl" --get=1
size=$(stat -c %s "$d/good.jsonl.offsets")
truncate -s 50 "$d/good.jsonl.offsets"
t_out truncated_index_is_rebuilt '{"num_tokens":1,"text":"f"}' "$ch1" --data="$d/good.jsonl" --get=2
if [ "$(stat -c %s "$d/good.jsonl.offsets")" = "$size" ]; then t_pass truncated_index_rewritten_whole
else t_failed truncated_index_rewritten_whole "index is $(stat -c %s "$d/good.jsonl.offsets") bytes, expected $size"; fi
# A valid header over a damaged entry (record 1's offset, 72 + 8 bytes in):
# the read fails with the index's name, it does not read outside the data.
printf '\xff\xff\xff\xff\xff\x00\x00\x00' | dd of="$d/other.jsonl.offsets" bs=1 seek=80 conv=notrunc status=none
t_fail damaged_index_entry 1 "other.jsonl.offsets: record 1: entry" "$ch1" --data="$d/other.jsonl" --get=1

# Shards: one bad shard is named, and a shard gets the checks its file gets alone.
t_fail shard_not_json 1 "shard 1, local record 1): $d/random.jsonl: record 1 (line 2, byte offset 9): not valid JSON" \
    "$ch1" --data="$d/good.jsonl,$d/random.jsonl" --check
t_fail shard_listed_twice 1 "shards: shard 2 ($d/./good.jsonl) is the same file as shard 0 (jsonl:$d/good.jsonl)" \
    "$ch1" --data="$d/good.jsonl,$d/second.jsonl,$d/./good.jsonl" --check
t_fail shard_missing 1 "shard 1: $d/absent.jsonl: cannot open" "$ch1" --data="$d/good.jsonl,$d/absent.jsonl" --check
t_out shards_global_index '{"num_tokens":9,"text":"second shard"}' "$ch1" --data="$d/good.jsonl,$d/second.jsonl" --get=3
t_fail shards_out_of_range 1 "record 4 is out of range (the dataset has 4 records)" \
    "$ch1" --data="$d/good.jsonl,$d/second.jsonl" --get=4

# The lesson's experiment on a small corpus: every strategy reads the same bytes.
# Its CSV goes to --out, never over the real plot in notebooks-out/.
t_out experiment_strategies_agree "index (reuse)" env TMPDIR="$d/work" "$ch1" --experiment --lines=3000 --out="$d/out"
# the table's last column says whether a strategy read the same records as the first ("yes" or "NO");
# the rest of the output holds paths, whose random temporary names can contain anything
agree=$(awk '/^strategy /{t = 1; next} t && NF == 0 {exit} t {print $NF}' <<<"$T_OUT" | tr '\n' ' ')
if [ "$agree" = "yes yes yes yes " ]; then t_pass experiment_no_disagreement
else t_failed experiment_no_disagreement "expected 'yes' in the agree column of 4 strategies, got: $agree"; fi
if [ "$(grep -c ',3000,' "$d/out/jsonl_strategies.csv" 2>/dev/null)" = 4 ]; then t_pass experiment_csv_in_out
else t_failed experiment_csv_in_out "expected 4 rows (one per strategy) of 3000 lines in $d/out/jsonl_strategies.csv"; fi

# Nothing above may have modified a data file.
if [ "$(sums)" = "$before" ]; then t_pass inputs_unchanged
else t_failed inputs_unchanged "a data file changed: $(diff <(echo "$before") <(sums) | head -n 4)"; fi

# Opening with and without a length field, or with another one, builds each
# sidecar once: switching back and forth rebuilds nothing. The sidecars are
# dated 2000 first: a rebuilt one (renamed over, possibly onto the same inode
# within the same second) has today's date.
ids() { stat -c '%i %.9Y' "$d/good.jsonl.offsets" "$d/good.jsonl.lengths.num_tokens" 2>/dev/null; }
t_out switch_builds_table "check:" "$ch1" --data="$d/good.jsonl" --length-field=num_tokens --check
touch -d '2000-01-01 00:00:00' "$d/good.jsonl.offsets" "$d/good.jsonl.lengths.num_tokens"
first=$(ids)
for field in "" num_tokens "" num_tokens; do
    t_run "$ch1" --data="$d/good.jsonl" ${field:+--length-field=$field} --get=0
done
if [ -n "$first" ] && [ "$(ids)" = "$first" ]; then t_pass switching_rebuilds_nothing
else t_failed switching_rebuilds_nothing "before: $first; after: $(ids)"; fi

# A build stopped by SIGINT or SIGTERM leaves no temporary file; one killed by
# SIGKILL leaves one, and the next run sweeps it (its pid is gone).
mkdir "$d/signals"
big="$d/signals/big.jsonl"
awk 'BEGIN { for (i = 0; i < 1500000; i++) printf "{\"num_tokens\":%d,\"text\":\"the loader reads a record from disk\"}\n", i % 97 }' > "$big"
unbuild() { rm -f "$big".lengths.num_tokens; }
t_signals_leave_no_tmp length_table "$big.lengths.num_tokens.tmp-*" unbuild \
    "$ch1" --data="$big" --length-field=num_tokens --get=0
rm -rf "$d/signals"

# The index build on a long file says where it is (forced on: stderr is not a terminal here),
# and stays quiet by default in a log.
# (A new file each time, so each run builds its index wherever the cache rule puts it.)
seq 1 50000 | sed 's/.*/{"v":&}/' > "$d/long.jsonl"
cp "$d/long.jsonl" "$d/long2.jsonl"
t_out progress_when_asked "building the offset index [" env DDP_PROGRESS=1 "$ch1" --data="$d/long.jsonl" --check
t_run "$ch1" --data="$d/long2.jsonl" --check
if grep -q "building the offset index" <<<"$T_OUT"; then t_failed progress_quiet_in_logs "printed: $T_OUT"
else t_pass progress_quiet_in_logs; fi
