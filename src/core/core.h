/* The core's contract towards the public entry points (api/): this header only gathers the
 * headers of the core's parts that api/ calls. Files inside core/ never include it; they include
 * the part they use, in the order tools/check_layers.sh enforces (docs/design.md, "Inside the
 * core").
 *
 * The api layer validates every argument once (pointers, counts, dtype, op, root, communicator
 * validity) and then calls these; the core trusts its arguments.
 *
 * Blocking: with stream == NULL on host buffers a collective returns when it is complete on this
 * rank. Thread-safety (docs/semantics.md, "Threads"): any thread may issue on any communicator,
 * several threads on one communicator included; operations of one communicator are ordered by
 * the order their calls took their lane tickets, which the ranks must agree on. */
#ifndef TT_CORE_H
#define TT_CORE_H

#include "core/coll.h"
#include "core/event.h"
#include "core/group.h"
#include "core/lifecycle.h"
#include "core/mem.h"
#include "core/redop.h"
#include "core/state.h"
#include "core/stream.h"
#include "core/task.h"

#endif
