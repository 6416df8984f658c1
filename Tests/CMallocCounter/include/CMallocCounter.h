#ifndef C_MALLOC_COUNTER_H
#define C_MALLOC_COUNTER_H

/// Starts counting allocations from zero (every thread of the process).
void depot_malloc_counter_start(void);
/// Stops counting and returns how many allocations there were since the start.
long depot_malloc_counter_stop(void);

#endif
