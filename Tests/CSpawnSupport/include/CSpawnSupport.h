#ifndef CSPAWNSUPPORT_H
#define CSPAWNSUPPORT_H

#include <spawn.h>

/// Makes a pipe whose two ends close on exec, atomically where the system
/// allows it (pipe2 on Linux). Returns 0, or -1 with errno set.
int depot_pipe_cloexec(int fds[2]);

/// Adds to `actions` the closing of every descriptor from `lowest` up in the
/// child, where the system offers it (glibc 2.34 and later); otherwise does
/// nothing and returns 0.
int depot_spawn_close_from(posix_spawn_file_actions_t *actions, int lowest);

#endif
