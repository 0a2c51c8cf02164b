# dataset_idx_bad_input: every bad IDX file we know of, through the program a
# user runs (build/chapter-1 --data=FILE --check / --get=I). Each must exit 1
# with a message that names the file and the byte offset or record at fault,
# never crash or hang, and never change an input file. The files are made here,
# byte by byte, so the test shows exactly what each one contains.
set -euo pipefail
. "$(dirname "$0")/../harness/lib.sh"
ch1="$BUILD/chapter-1"
d=$T_TMP

mk() { printf '%b' "$2" > "$d/$1"; } # mk NAME BYTES: BYTES in printf %b escapes
hdr3='\0\0\x08\x03\0\0\0\x03\0\0\0\x02\0\0\0\x02' # idx3: 3 records of 2x2 unsigned bytes
recs='\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c'

mkdir "$d/a-directory"
: > "$d/empty"
mk magic-only '\0\0\x08'
mk short-header '\0\0\x08\x03\0\0\0\x03\0\0'
mk wrong-magic "\x12\x34\x08\x03\0\0\0\x03\0\0\0\x02\0\0\0\x02$recs"
mk bad-type "\0\0\x07\x03\0\0\0\x03\0\0\0\x02\0\0\0\x02$recs"
mk no-dims '\0\0\x08\x00'
mk mid-record "$hdr3\x01\x02\x03\x04\x05\x06"
mk extra-bytes "$hdr3$recs\xff"
# 4 dimensions of 2^32-1: the record size (all but the first) passes 2^64 at dimension 3
mk overflow-record '\0\0\x08\x04\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff'
# 3 dimensions of 2^32-1: records fit, records x count does not
mk overflow-total '\0\0\x08\x03\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff'
mk ok-images-idx3-ubyte "$hdr3$recs"
mk ok-labels-idx1-ubyte '\0\0\x08\x01\0\0\0\x03\x01\x02\x03'
mk ok2-images-idx3-ubyte "$hdr3$recs"
mk ok2-labels-idx1-ubyte '\0\0\x08\x01\0\0\0\x03\x01\x02\x03'
mk count-images-idx3-ubyte "$hdr3$recs"
mk count-labels-idx1-ubyte '\0\0\x08\x01\0\0\0\x02\x01\x02'
mk type-images-idx3-ubyte "$hdr3$recs"
mk type-labels-idx1-ubyte '\0\0\x0c\x01\0\0\0\x03\0\0\0\x01\0\0\0\x02\0\0\0\x03'
mk range-images-idx3-ubyte "$hdr3$recs"
mk range-labels-idx1-ubyte '\0\0\x08\x01\0\0\0\x03\x01\x02\x0c'
# gzip: a good stream cut short, one with a damaged deflate body, one whose
# content is a bad IDX (the message must say the offset is in the decompressed bytes)
seq 1 2000 > "$d/noise"
cat "$d/ok-images-idx3-ubyte" "$d/noise" | gzip -c > "$d/payload.gz"
head -c 30 "$d/payload.gz" > "$d/cut.gz"
cp "$d/payload.gz" "$d/damaged.gz"
printf '\xff\xff\xff\xff\xff\xff\xff\xff' | dd of="$d/damaged.gz" bs=1 seek=20 conv=notrunc status=none
gzip -c "$d/mid-record" > "$d/mid-record.gz"
rm "$d/noise"
# A gzip bomb: a header promising one 2x2 record, then 200 MB of zeros (200 kB gzipped).
{ printf '\0\0\x08\x03\0\0\0\x01\0\0\0\x02\0\0\0\x02'; head -c 200000000 /dev/zero; } | gzip -1 > "$d/bomb.gz"
# A header whose promise (219979633 x 39986 x 2097149 bytes, 38 short of 2^64)
# plus the cache's own header passes 2^64: refused, not wrapped to a tiny size.
{ printf '\0\0\x08\x03\x0d\x1c\x9f\x71\0\0\x9c\x32\0\x1f\xff\xfd'; head -c 1000 /dev/zero; } | gzip -1 > "$d/wrap.gz"
# A gzipped header that is not IDX: refused after its first bytes, nothing cached.
{ printf 'not an IDX header at all'; head -c 50000000 /dev/zero; } | gzip -1 > "$d/notidx.gz"
# FIFOs: one as data, one where fifo-cache.gz's decompressed cache goes
mkfifo "$d/a-fifo" "$d/fifo-cache.gz.ddpcache"
gzip -c "$d/ok-images-idx3-ubyte" > "$d/fifo-cache.gz"
# a link to the gzip file itself where its cache goes
mkdir "$d/link"
cp "$d/fifo-cache.gz" "$d/link/linked.gz"
ln -s linked.gz "$d/link/linked.gz.ddpcache"
# and one to another file
cp "$d/fifo-cache.gz" "$d/link/second.gz"
echo "not a cache" > "$d/link/keep.txt"
ln -s keep.txt "$d/link/second.gz.ddpcache"

sums() { (cd "$d" && find . -type f ! -name '*.ddpcache' | sort | xargs sha256sum); }
before=$(sums)

# bad NAME FILE NEEDLE: `--check` on FILE exits 1 with a message containing NEEDLE
bad() { t_fail "$1" 1 "$3" "$ch1" --data="$d/$2" --check; }
# bad_file NAME FILE TEXT: the same, the message being "FILE: TEXT"
bad_file() { bad "$1" "$2" "$d/$2: $3"; }

bad_file missing nope "cannot open: No such file"
bad_file directory a-directory "not a regular file (a directory)"
bad_file empty empty "empty file (0 bytes)"
bad_file header_in_magic magic-only "truncated header: byte 3"
bad_file header_in_dims short-header "truncated header: byte 10: 3 dimensions need a 16-byte header"
bad_file wrong_magic wrong-magic "byte 0: wrong magic number 0x12340803"
bad_file bad_type bad-type "byte 2: unsupported type code 0x07"
bad_file no_dims no-dims "byte 3: 0 dimensions"
bad_file mid_record mid-record "truncated at record 1 (byte 20): the header promises 3 records of 4 bytes"
bad_file extra_bytes extra-bytes "byte 28: 1 bytes follow the last of the 3 records"
bad_file overflow_record overflow-record "byte 16: dimension 3 (4294967295) makes the record size overflow"
bad_file overflow_total overflow-total "byte 4: 4294967295 records of 18446744065119617025 bytes overflow"
bad counts_disagree count-images-idx3-ubyte \
    "image and label counts disagree: $d/count-images-idx3-ubyte has 3 records, $d/count-labels-idx1-ubyte has 2 labels"
bad labels_not_bytes type-images-idx3-ubyte \
    "$d/type-labels-idx1-ubyte: bytes 2-3: a labels file must be idx1 of unsigned bytes"
bad label_out_of_range range-images-idx3-ubyte "$d/range-labels-idx1-ubyte: byte 10 (record 2): label 12 is outside 0..9"
bad_file gzip_cut_short cut.gz "corrupt gzip stream: it ends early, at compressed byte 30"
bad_file gzip_damaged damaged.gz "corrupt gzip stream at compressed byte"
bad gzip_bad_content mid-record.gz "$d/mid-record.gz (decompressed): truncated at record 1 (byte 20)"
# Decompression is bounded by the header: under a 20 MB file-size limit the
# bomb stops at the promise (without the bound, it would fail at the limit,
# with "file size limit (ulimit -f) reached" instead).
t_fail gzip_bomb 1 "$d/bomb.gz (decompressed): byte 20: the gzip stream inflates past the 20 bytes its IDX header promises" \
    bash -c 'ulimit -f 20000; exec "$0" "$@"' "$ch1" --data="$d/bomb.gz" --check
t_fail gzip_not_idx 1 "$d/notidx.gz (decompressed): byte 0: wrong magic number 0x6e6f7420" \
    bash -c 'ulimit -f 20000; exec "$0" "$@"' "$ch1" --data="$d/notidx.gz" --check
t_fail gzip_promise_past_2_64 1 "$d/wrap.gz (decompressed): the header promises 18446744073709551578 bytes of records: more than any disk holds" \
    bash -c 'ulimit -f 20000; exec "$0" "$@"' "$ch1" --data="$d/wrap.gz" --check
if compgen -G "$d/bomb.gz.ddpcache*" > /dev/null || compgen -G "$d/notidx.gz.ddpcache*" > /dev/null; then
    t_failed gzip_bomb_leaves_no_cache "$(ls "$d" | grep ddpcache)"
else t_pass gzip_bomb_leaves_no_cache; fi
# A FIFO opened for reading waits for a writer: as data, and as the gzip cache
# left in the cache's place, it must be refused or passed by at once, and the
# FIFO left as it is (the cache goes to the cache directory). The short time
# limit turns a hang into a FAIL (status 124). (sums() skips them: -type f.)
T_TIMEOUT=20 bad_file fifo a-fifo "not a regular file (a FIFO)"
T_TIMEOUT=20 t_out fifo_as_gzip_cache_is_passed_by "all 3 records OK" \
    env DDP_CACHE_DIR="$d/cache" "$ch1" --data="$d/fifo-cache.gz" --check
if [ -p "$d/fifo-cache.gz.ddpcache" ] && compgen -G "$d/cache/fifo-cache.gz-*.ddpcache" > /dev/null; then
    t_pass fifo_cache_left_alone
else t_failed fifo_cache_left_alone "$(ls -l "$d/fifo-cache.gz.ddpcache" "$d/cache" 2>&1)"; fi
# A cache name that links to the gzip file itself: writing through the link
# would replace the source with its decompressed copy; the cache goes to the
# cache directory (the files are made above, before sums).
t_out gzip_cache_link_to_the_source "all 3 records OK" env DDP_CACHE_DIR="$d/cache" "$ch1" --data="$d/link/linked.gz" --check
if cmp -s "$d/fifo-cache.gz" "$d/link/linked.gz" && compgen -G "$d/cache/linked.gz-*.ddpcache" > /dev/null; then
    t_pass gzip_cache_link_leaves_the_source
else t_failed gzip_cache_link_leaves_the_source "$(ls -lL "$d/link" "$d/cache" 2>&1)"; fi
t_out gzip_cache_link_to_another_file "all 3 records OK" env DDP_CACHE_DIR="$d/cache" "$ch1" --data="$d/link/second.gz" --check
if echo "not a cache" | cmp -s - "$d/link/keep.txt"; then t_pass gzip_cache_link_leaves_the_other_file
else t_failed gzip_cache_link_leaves_the_other_file "keep.txt now: $(head -c 64 "$d/link/keep.txt" | od -c | head -n 2)"; fi
ok=$d/ok-images-idx3-ubyte
t_fail get_past_the_end 1 "idx:$ok: record 3 is out of range (the dataset has 3 records)" \
    "$ch1" --data="$ok" --get=3
t_fail get_not_a_number 2 "--get: expected 0 to 18446744073709551615, got 'x'" "$ch1" --data="$ok" --get=x
t_out good_file_checks "all 3 records OK (sizes, labels 0..9)" "$ch1" --data="$ok" --check
t_out good_file_get "record 2 of idx:$ok: 4 bytes, label 3" "$ch1" --data="$ok" --get=2

# Shards get the checks their files get alone: a label of 12 is refused in a
# shard list as it is in the file, and a file listed twice is said.
bad shard_label_out_of_range "ok-images-idx3-ubyte,$d/range-images-idx3-ubyte" \
    "(shard 1, local record 2): $d/range-labels-idx1-ubyte: byte 10 (record 2): label 12 is outside 0..9"
bad shard_listed_twice "ok-images-idx3-ubyte,$d/ok-images-idx3-ubyte" "shard 1 ($d/ok-images-idx3-ubyte) is the same file as shard 0"
t_out shards_check "all 6 records OK (sizes, labels 0..9)" "$ch1" --data="$ok,$d/ok2-images-idx3-ubyte" --check

# --length-field names a field of JSONL records: IDX has none, so it is refused, not ignored.
t_fail length_field_refused 1 "$ok: a length field (\"num_tokens\") is a field of JSONL records; IDX records have none" \
    "$ch1" --data="$ok" --length-field=num_tokens --check

after=$(sums)
if [ "$before" = "$after" ]; then t_pass inputs_unchanged
else t_failed inputs_unchanged "an input file changed: $(diff <(echo "$before") <(echo "$after") | head -n 4)"; fi
left=$(find "$d" -name '*.tmp-*')
if [ -z "$left" ]; then t_pass no_temporary_files_left
else t_failed no_temporary_files_left "left behind: $left"; fi

# Decompression stopped by SIGINT or SIGTERM leaves no temporary file; one
# killed by SIGKILL leaves one, which the next open sweeps (its pid is gone).
mkdir "$d/signals"
big=$d/signals/big-images-idx3-ubyte.gz # 40000 records of 64x64 zeros: 164 MB inflated
{ printf '\0\0\x08\x03\0\0\x9c\x40\0\0\0\x40\0\0\0\x40'; head -c 163840000 /dev/zero; } | gzip -1 > "$big"
uncache() { rm -f "$big".ddpcache; }
t_signals_leave_no_tmp inflate "$big.ddpcache.tmp-*" uncache "$ch1" --data="$big" --get=0
rm -rf "$d/signals"
