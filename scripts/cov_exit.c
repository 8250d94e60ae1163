// scripts/cov_exit.c: linked into every binary of the coverage build (scripts/coverage), which
// links with -Wl,--wrap=_exit: every call of _exit in the linked objects (die() in common/util.c,
// train.c's exit on a config or input error, ./attnmap's usage errors, dist_abort without MPI)
// comes here, writes the gcov counts and then ends the process as _exit does. _exit skips gcov's
// exit handler, so without this every process that ends that way would show its error path as
// never run. Not part of any other build.
#include <stdnoreturn.h>

void __gcov_dump(void);
noreturn void __real__exit(int code);
noreturn void __wrap__exit(int code);

noreturn void __wrap__exit(int code) {
    __gcov_dump();
    __real__exit(code);
}
