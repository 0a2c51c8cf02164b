# labgen: makes a lab's learner file from a reference module (one source of truth).
#
# In the reference source an exercise region is marked by line comments:
#
#       // LAB:BEGIN index-build
#       ... reference code, dropped from the learner file ...
#       // LAB:STUB return LAB_TODO("index-build");
#       // LAB:END
#
# Every LAB:STUB line becomes a code line (the text after "LAB:STUB "), and the
# region is introduced by a comment that names it and the lab README.
#
#   awk -v src=lib/x.c -v readme=labs/01-dataset/README.md [-v only=REGION] -f labs/labgen.awk lib/x.c
#   awk -v src=lib/x.c -v mutant=FILE -v lab_regions="a b" -f labs/labgen.awk lib/x.c
#   awk -v as_mutant=1 -f labs/labgen.awk lib/x.c
#
# only=REGION stubs that region alone and keeps the others' reference code: the
# grader self-check uses it to prove that each region on its own is tested.
#
# mutant=FILE writes a stored wrong solution instead: the reference, with each
# region FILE names replaced by FILE's code for it (the others keep theirs).
# A mutant file (tests/labs/mutants/NN-what-is-wrong.mutant) reads:
#
#       # what this plausible wrong solution does, in one line
#       # (more comment lines, or blank ones, may follow before the first region)
#       @@ region index-scan
#       ... C lines that replace the region's code ...
#       @@ region record-lookup
#       ...
#
# Every line after "@@ region NAME" is C, up to the next "@@ region" or the
# end. lab_regions lists every region of the lab (its references may be several
# files): a mutant naming a region outside it, naming one twice, naming none, or
# lacking its first comment line is refused, with the file and line.
#
# as_mutant=1 prints the reference's regions in that format, each with its own
# code (no header line): the reference in a mutant's clothes, which the mutant
# check must see survive.
function mutant_error(line, why) {
    if (line > 0)
        printf "labgen: %s:%d: %s\n", mutant, line, why > "/dev/stderr"
    else
        printf "labgen: %s: %s\n", mutant, why > "/dev/stderr"
    failed = 1
    exit 1
}
function mutant_read(    line, n, name, known, known_list, i, count) {
    count = split(lab_regions, known_list, " ")
    for (i = 1; i <= count; i++)
        known[known_list[i]] = 1
    name = ""
    while ((getline line < mutant) > 0) {
        n++
        if (n == 1 && line !~ /^#[ \t]*[^ \t]/)
            mutant_error(n, "the first line must be a comment saying what this wrong solution does (\"# ...\")")
        if (line ~ /^@@/) {
            if (line !~ /^@@ region [^ \t]+[ \t]*$/)
                mutant_error(n, "expected \"@@ region NAME\", got \"" line "\"")
            name = line
            sub(/^@@ region /, "", name)
            sub(/[ \t]+$/, "", name)
            if (!(name in known))
                mutant_error(n, "this lab has no region named " name " (its regions: " lab_regions ")")
            if (name in body)
                mutant_error(n, "region " name " is named twice")
            body[name] = ""
            body_line[name] = n + 1
            continue
        }
        if (name == "") {
            if (line !~ /^#/ && line !~ /^[ \t]*$/)
                mutant_error(n, "only comment lines may come before the first \"@@ region NAME\"")
            continue
        }
        body[name] = body[name] line "\n"
    }
    if (n == 0)
        mutant_error(0, "cannot read it, or it is empty")
    close(mutant)
    if (name == "")
        mutant_error(n, "names no region (\"@@ region NAME\" lines)")
}
BEGIN {
    if (as_mutant) {
        region = ""
    } else if (mutant != "") {
        mutant_read()
        printf "/* Stored wrong solution %s: the regions it names replaced in %s (labs/labgen.awk). */\n", mutant, src
    } else {
        printf "/* Lab file generated from %s by labs/labgen.awk: write the LAB regions (see %s). */\n", src, readme
        print "#include \"lab_todo.h\""
    }
    region = ""
}
/^[ \t]*\/\/ LAB:BEGIN / {
    if (region != "") { print "labgen: " FILENAME ":" FNR ": LAB:BEGIN inside region " region > "/dev/stderr"; exit 1 }
    region = $3; seen[region] = 1
    if (as_mutant) {
        print "@@ region " region
        next
    }
    if (mutant != "") {
        replaced = (region in body)
        # #line: a compiler error in the replacement points into the mutant file
        if (replaced)
            printf "#line %d \"%s\"\n%s", body_line[region], mutant, body[region]
        next
    }
    stubbed = (only == "" || only == region)
    if (stubbed) {
        indent = $0; sub(/\/\/.*/, "", indent)
        printf "%s/* LAB %s: your code here (see %s). */\n", indent, region, readme
    }
    next
}
/^[ \t]*\/\/ LAB:STUB / {
    if (region == "") { print "labgen: " FILENAME ":" FNR ": LAB:STUB outside a region" > "/dev/stderr"; exit 1 }
    if (mutant == "" && !as_mutant && stubbed) { line = $0; sub(/\/\/ LAB:STUB /, "", line); print line }
    next
}
/^[ \t]*\/\/ LAB:END/ {
    if (region == "") { print "labgen: " FILENAME ":" FNR ": LAB:END outside a region" > "/dev/stderr"; exit 1 }
    if (mutant != "" && replaced)
        printf "#line %d \"%s\"\n", FNR + 1, src
    region = ""; replaced = 0; next
}
{
    if (as_mutant) { if (region != "") print }
    else if (region == "") print
    else if (mutant != "" ? !replaced : !stubbed) print
}
END {
    if (failed) exit 1
    if (region != "") { print "labgen: " FILENAME ": region " region " is never closed" > "/dev/stderr"; exit 1 }
    if (only != "" && !(only in seen)) { print "labgen: " FILENAME ": no region named " only > "/dev/stderr"; exit 1 }
}
