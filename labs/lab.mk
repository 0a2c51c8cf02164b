# lab.mk: the parts of a lab's grader that do not depend on the learner's
# file, built once per build directory and kept up to date (labs/lab.sh runs
# it before it compiles the learner's file and links the grader):
#
#   $(BUILD)/labs/harness/*.o       the grading engine and the test harness, shared by every lab
#   $(BUILD)/labs/lab-N/shared/grade.o     lab N's tests (LAB_DIR/grade.c)
#   $(BUILD)/labs/lab-N/shared/libbase.a   the library less the modules the learner's files
#                                          stand in for (EXCLUDED: their archive members)
#
# A changed grade.c, harness file or header they include (the compiler's
# dependency files), a rebuilt library, or other compiler flags (FLAGS_FILE,
# which lab.sh rewrites only when they change) rebuild what they touch.
#
#   make -f labs/lab.mk BUILD=build LAB_DIR=labs/03-loader SHARED=build/labs/lab-3/shared \
#       EXCLUDED='loader.o' FLAGS_FILE=build/labs/flags CC=cc CPPFLAGS=... CFLAGS=...
HARNESS_DIR := $(BUILD)/labs/harness
HARNESS_OBJS := $(HARNESS_DIR)/grader.o $(HARNESS_DIR)/isolate.o $(HARNESS_DIR)/heap.o
COMPILE = $(CC) $(CPPFLAGS) -Ilabs -Itests/harness $(CFLAGS) $(LAB_WARN) -MMD -MP -c -o $@ $<

all: $(HARNESS_OBJS) $(SHARED)/grade.o $(SHARED)/libbase.a

$(HARNESS_DIR)/grader.o: labs/grader.c $(FLAGS_FILE)
	@mkdir -p $(@D)
	$(COMPILE)
$(HARNESS_DIR)/%.o: tests/harness/%.c $(FLAGS_FILE)
	@mkdir -p $(@D)
	$(COMPILE)
$(SHARED)/grade.o: $(LAB_DIR)/grade.c $(FLAGS_FILE)
	@mkdir -p $(@D)
	$(COMPILE) -I$(LAB_DIR)
# The archive less the members under test, so the two never collide
# (basenames are unique in lib/ and sim/).
$(SHARED)/libbase.a: $(BUILD)/libddp.a
	@mkdir -p $(@D)
	cp $< $@.tmp
	ar d $@.tmp $(EXCLUDED)
	mv $@.tmp $@

.PHONY: all
-include $(wildcard $(HARNESS_DIR)/*.d $(SHARED)/*.d)
