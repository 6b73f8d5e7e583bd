/* The command interpreter: records a batch of already-planned compute
 * commands into a Vulkan command buffer with one call from Python.
 *
 * Python plans and validates every op; what reaches this file is a stream
 * of 64-bit words naming prebuilt dispatch records (pipeline, layout,
 * descriptors, push constants, workgroup counts, hazard keys) and global
 * memory barriers. Walking it here costs a few nanoseconds per command,
 * against about a third of a microsecond per cffi call from Python.
 *
 * Hazards: a dispatch flagged TRACK_HAZARDS is checked against the stream's
 * gc_tracker (the hazard keys written and read since the last barrier, as
 * vk/sync.py's HazardTracker keeps them for the Python walker); on a
 * read-after-write, write-after-read or write-after-write the walker
 * records one global memory barrier before it. Every barrier recorded
 * clears the tracker. Before a direct dispatch that barrier reaches only
 * compute shaders (one that also reached the transfer and indirect stages
 * cost about 2.4 us more per dependent dispatch on an H100); the tracker then notes that earlier work is ordered
 * before compute shaders alone (`narrowed`), and an indirect dispatch, whose
 * parameters the command processor reads, gets a barrier to every guest
 * stage first. vk/sync.py says the same for the work Python orders.
 *
 * guestcompute/vk/command_stream.py writes gc_dispatch from its FIELDS
 * table, and its Python walker does exactly what this one does. The table
 * below (gc_fields) names each field's offset and size, so the loader and
 * the tests can check the two languages agree field for field.
 *
 * No Vulkan headers: the few types needed are spelled out below, so a C
 * compiler alone builds this file. Handles of non-dispatchable objects are
 * 64-bit integers on every platform Vulkan supports; command buffers are
 * pointers. */

#include <stddef.h>
#include <stdlib.h>

typedef unsigned int u32;
typedef unsigned long long u64;
typedef __UINTPTR_TYPE__ uptr;    /* gcc and clang define it */

/* One dispatch, built once when its plan is resolved (what each field
 * holds: FIELDS in command_stream.py, in this order). */
typedef struct gc_dispatch {
    u64 pipeline;
    u64 layout;
    u64 descriptors;
    u64 descriptor_writes;
    u64 descriptor_set;
    u64 push;
    u64 indirect_buffer;
    u64 indirect_offset;
    u64 hazard_reads;     /* const u64 * */
    u64 hazard_writes;    /* const u64 * */
    u32 descriptor_write_count;
    u32 push_size;
    u32 group_x;
    u32 group_y;
    u32 group_z;
    u32 flags;
    u32 hazard_read_count;
    u32 hazard_write_count;
} gc_dispatch;

#define TRACK_HAZARDS 1u      /* gc_dispatch.flags: check and track its hazard keys */

/* What is bound in the command buffer now; the recorder clears it when
 * something else (a host hook, a program replay) may have bound state. */
typedef struct gc_bound {
    u64 pipeline;
    u64 layout;
    u64 descriptors;
} gc_bound;

typedef void (*bind_pipeline_fn)(void *cmd, u32 bind_point, u64 pipeline);
typedef void (*push_descriptors_fn)(void *cmd, u32 bind_point, u64 layout, u32 set, u32 count,
                                    const void *writes);
typedef void (*bind_sets_fn)(void *cmd, u32 bind_point, u64 layout, u32 first, u32 count,
                             const u64 *sets, u32 dynamic_count, const u32 *dynamic_offsets);
typedef void (*push_constants_fn)(void *cmd, u64 layout, u32 stages, u32 offset, u32 size,
                                  const void *values);
typedef void (*dispatch_fn)(void *cmd, u32 x, u32 y, u32 z);
typedef void (*dispatch_indirect_fn)(void *cmd, u64 buffer, u64 offset);
typedef void (*barrier_fn)(void *cmd, u32 src_stages, u32 dst_stages, u32 dependency_flags,
                           u32 memory_count, const void *memory, u32 buffer_count, const void *buffers,
                           u32 image_count, const void *images);

/* The device's entry points (from vkGetDeviceProcAddr, so the validation
 * layer sees every call when it is enabled). push_descriptors is 0 without
 * VK_KHR_push_descriptor. */
typedef struct gc_functions {
    bind_pipeline_fn bind_pipeline;
    push_descriptors_fn push_descriptors;
    bind_sets_fn bind_sets;
    push_constants_fn push_constants;
    dispatch_fn dispatch;
    dispatch_indirect_fn dispatch_indirect;
    barrier_fn barrier;
} gc_functions;

/* VkMemoryBarrier */
typedef struct memory_barrier {
    u32 type;
    const void *next;
    u32 src_access;
    u32 dst_access;
} memory_barrier;

#define BIND_POINT_COMPUTE 1u
#define SHADER_STAGE_COMPUTE 0x20u
#define STRUCTURE_TYPE_MEMORY_BARRIER 46u

/* Stream words: a gc_dispatch address, or a barrier word followed by four
 * words (source stages, destination stages, source access, destination
 * access). BARRIER_COVERING widens a barrier that has source stages by the
 * stages and write accesses tracked since the last barrier (recording it
 * clears the tracker, so it must also wait for them). */
#define BARRIER 1ull
#define BARRIER_COVERING 2ull

/* -- the hazard tracker ------------------------------------------------------ */

/* A set of 64-bit keys: open addressing, linear probing, at most half full.
 * A slot is in the set when its generation is the set's: clearing is one
 * increment, however large the set grew. */
typedef struct key_slot {
    u64 key;
    u64 generation;
} key_slot;

typedef struct key_set {
    key_slot *slots;      /* capacity slots, a power of two (none until the first key) */
    u64 capacity;
    u64 count;
    u64 generation;       /* from 1: calloc'd slots are empty */
} key_set;

/* The tracker's state as Python reads and writes it (TRACKER_FIELDS in
 * native_tracker.py), then the two sets. */
typedef struct gc_tracker {
    u64 stages;           /* stages that touched anything since the last barrier */
    u64 access;           /* write accesses made since the last barrier */
    u64 dst_stages;       /* second scope of a hazard barrier (the guest's stages and accesses) */
    u64 dst_access;
    u64 dispatch_stages;  /* what a tracked dispatch adds: its stage, and its access when it writes */
    u64 dispatch_access;
    u64 barriers;         /* barriers recorded through this tracker */
    u64 hazard_barriers;  /* of them, the ones the walker added for a hazard */
    u64 covered_stages;   /* OR of the source stages of every barrier recorded */
    u64 covered_access;   /* likewise, source accesses */
    u64 near_stages;      /* second scope of a hazard barrier before a direct dispatch: compute shaders */
    u64 near_access;
    u64 narrowed;         /* a barrier since the last one to every guest stage reached compute shaders only */
    key_set written;
    key_set read;
} gc_tracker;

static u64 slot_of(u64 key, u64 capacity)
{
    u64 h = key * 0x9E3779B97F4A7C15ull;
    return (h ^ (h >> 29)) & (capacity - 1);
}

static int set_contains(const key_set *s, u64 key)
{
    if (s->count == 0)
        return 0;
    for (u64 i = slot_of(key, s->capacity);; i = (i + 1) & (s->capacity - 1)) {
        const key_slot *slot = &s->slots[i];
        if (slot->generation != s->generation)
            return 0;
        if (slot->key == key)
            return 1;
    }
}

/* Room must have been made (set_reserve). */
static void set_add(key_set *s, u64 key)
{
    for (u64 i = slot_of(key, s->capacity);; i = (i + 1) & (s->capacity - 1)) {
        key_slot *slot = &s->slots[i];
        if (slot->generation != s->generation) {
            slot->key = key;
            slot->generation = s->generation;
            s->count += 1;
            return;
        }
        if (slot->key == key)
            return;
    }
}

/* Makes room for `extra` more keys; 0 when out of memory (the set is unchanged). */
static int set_reserve(key_set *s, u64 extra)
{
    u64 need = (s->count + extra) * 2, capacity = 16;
    if (need <= s->capacity)
        return 1;
    while (capacity < need)
        capacity *= 2;
    key_slot *slots = calloc(capacity, sizeof(key_slot));
    if (!slots)
        return 0;
    key_set grown = {slots, capacity, 0, s->generation};
    for (u64 i = 0; i < s->capacity; i++)
        if (s->slots[i].generation == s->generation)
            set_add(&grown, s->slots[i].key);
    free(s->slots);
    *s = grown;
    return 1;
}

static void set_clear(key_set *s)
{
    s->generation += 1;
    s->count = 0;
}

static int any_in(const key_set *s, const u64 *keys, u64 n)
{
    for (u64 i = 0; i < n; i++)
        if (set_contains(s, keys[i]))
            return 1;
    return 0;
}

gc_tracker *gc_tracker_new(u64 dst_stages, u64 dst_access, u64 dispatch_stages, u64 dispatch_access)
{
    gc_tracker *t = calloc(1, sizeof(gc_tracker));
    if (!t)
        return 0;
    t->dst_stages = dst_stages;
    t->dst_access = dst_access;
    t->dispatch_stages = dispatch_stages;
    t->dispatch_access = dispatch_access;
    t->written.generation = t->read.generation = 1;
    return t;
}

void gc_tracker_free(gc_tracker *t)
{
    if (!t)
        return;
    free(t->written.slots);
    free(t->read.slots);
    free(t);
}

/* A read-after-write, write-after-write or write-after-read since the last barrier. */
int gc_tracker_needs_barrier(const gc_tracker *t, const u64 *reads, u64 read_count, const u64 *writes,
                             u64 write_count)
{
    return any_in(&t->written, reads, read_count) || any_in(&t->written, writes, write_count)
           || any_in(&t->read, writes, write_count);
}

/* Returns 0, changing nothing, when out of memory. */
int gc_tracker_touch(gc_tracker *t, const u64 *reads, u64 read_count, const u64 *writes, u64 write_count,
                     u64 stages, u64 access)
{
    if (!set_reserve(&t->read, read_count) || !set_reserve(&t->written, write_count))
        return 0;
    for (u64 i = 0; i < read_count; i++)
        set_add(&t->read, reads[i]);
    for (u64 i = 0; i < write_count; i++)
        set_add(&t->written, writes[i]);
    t->stages |= stages;
    if (write_count)
        t->access |= access;
    return 1;
}

void gc_tracker_after_barrier(gc_tracker *t)
{
    set_clear(&t->written);
    set_clear(&t->read);
    t->stages = 0;
    t->access = 0;
}

/* Copies up to `cap` keys of the written (or read) set to `out`; returns how many it holds. */
u64 gc_tracker_keys(const gc_tracker *t, int written, u64 *out, u64 cap)
{
    const key_set *s = written ? &t->written : &t->read;
    u64 n = 0;
    for (u64 i = 0; i < s->capacity; i++)
        if (s->slots[i].generation == s->generation) {
            if (n < cap)
                out[n] = s->slots[i].key;
            n += 1;
        }
    return n;
}

/* -- layouts, for the loader's check ----------------------------------------- */

/* Each field's name, offset and size, in declaration order; the last entry
 * has no name and the struct's size as its offset. The loader refuses a
 * build whose layouts differ from FIELDS and TRACKER_FIELDS. */
typedef struct gc_field {
    const char *name;
    u32 offset;
    u32 size;
} gc_field;

#define FIELD(type, name) {#name, (u32)offsetof(type, name), (u32)sizeof(((type *)0)->name)}

static const gc_field dispatch_fields[] = {
    FIELD(gc_dispatch, pipeline), FIELD(gc_dispatch, layout), FIELD(gc_dispatch, descriptors),
    FIELD(gc_dispatch, descriptor_writes), FIELD(gc_dispatch, descriptor_set), FIELD(gc_dispatch, push),
    FIELD(gc_dispatch, indirect_buffer), FIELD(gc_dispatch, indirect_offset), FIELD(gc_dispatch, hazard_reads),
    FIELD(gc_dispatch, hazard_writes), FIELD(gc_dispatch, descriptor_write_count), FIELD(gc_dispatch, push_size),
    FIELD(gc_dispatch, group_x), FIELD(gc_dispatch, group_y), FIELD(gc_dispatch, group_z),
    FIELD(gc_dispatch, flags), FIELD(gc_dispatch, hazard_read_count), FIELD(gc_dispatch, hazard_write_count),
    {0, (u32)sizeof(gc_dispatch), 0},
};

/* Only the part Python reads: the sets stay private to this file. */
static const gc_field tracker_fields[] = {
    FIELD(gc_tracker, stages), FIELD(gc_tracker, access), FIELD(gc_tracker, dst_stages),
    FIELD(gc_tracker, dst_access), FIELD(gc_tracker, dispatch_stages), FIELD(gc_tracker, dispatch_access),
    FIELD(gc_tracker, barriers), FIELD(gc_tracker, hazard_barriers), FIELD(gc_tracker, covered_stages),
    FIELD(gc_tracker, covered_access), FIELD(gc_tracker, near_stages), FIELD(gc_tracker, near_access),
    FIELD(gc_tracker, narrowed),
    {0, (u32)offsetof(gc_tracker, written), 0},
};

const gc_field *gc_dispatch_fields(void) { return dispatch_fields; }
const gc_field *gc_tracker_fields(void) { return tracker_fields; }

/* -- the walker ----------------------------------------------------------------- */

/* Whether earlier guest work is left ordered before compute shaders only
 * after a barrier with these scopes (TrackerRules.narrowed_after in
 * vk/sync.py): a barrier from the dispatches' stage to every guest stage
 * orders all of it (a narrower barrier before it reached that stage); one
 * that reaches less leaves the work tracked so far, and any left before. */
static u64 narrowed_after(const gc_tracker *t, u64 src_stages, u64 src_access, u64 dst_stages, u64 dst_access)
{
    int from_dispatches = (src_stages & t->dispatch_stages) == t->dispatch_stages
                          && (src_access & t->dispatch_access) == t->dispatch_access;
    int to_guest = (dst_stages & t->dst_stages) == t->dst_stages && (dst_access & t->dst_access) == t->dst_access;
    if (from_dispatches && to_guest)
        return 0;
    return (t->narrowed || t->stages) ? 1 : 0;
}

static void record_barrier(const gc_functions *fn, gc_tracker *t, void *cmd, u32 src_stages, u32 dst_stages,
                           u32 src_access, u32 dst_access)
{
    memory_barrier b = {STRUCTURE_TYPE_MEMORY_BARRIER, 0, src_access, dst_access};
    fn->barrier(cmd, src_stages, dst_stages, 0, 1, &b, 0, 0, 0, 0);
    if (t) {
        t->narrowed = narrowed_after(t, src_stages, src_access, dst_stages, dst_access);
        t->barriers += 1;
        t->covered_stages |= src_stages;
        t->covered_access |= src_access;
        gc_tracker_after_barrier(t);
    }
}

static void record_dispatch(const gc_functions *fn, gc_bound *bound, void *cmd, const gc_dispatch *d)
{
    if (d->pipeline != bound->pipeline) {
        fn->bind_pipeline(cmd, BIND_POINT_COMPUTE, d->pipeline);
        bound->pipeline = d->pipeline;
    }
    if (d->descriptors != bound->descriptors || d->layout != bound->layout) {
        if (d->descriptor_writes)
            fn->push_descriptors(cmd, BIND_POINT_COMPUTE, d->layout, 0, d->descriptor_write_count,
                                 (const void *)(uptr)d->descriptor_writes);
        else
            fn->bind_sets(cmd, BIND_POINT_COMPUTE, d->layout, 0, 1, (const u64 *)(uptr)d->descriptor_set, 0, 0);
        bound->descriptors = d->descriptors;
        bound->layout = d->layout;
    }
    if (d->push_size)
        fn->push_constants(cmd, d->layout, SHADER_STAGE_COMPUTE, 0, d->push_size, (const void *)(uptr)d->push);
    if (d->indirect_buffer)
        fn->dispatch_indirect(cmd, d->indirect_buffer, d->indirect_offset);
    else
        fn->dispatch(cmd, d->group_x, d->group_y, d->group_z);
}

/* Returns the number of words consumed (n on success). It stops early,
 * before the command it cannot record, on a malformed stream (a barrier cut
 * short, a tracked dispatch without a tracker) and when the tracker runs out
 * of memory. `tracker` may be 0 for a stream without tracked dispatches. */
unsigned long long gc_record(const gc_functions *fn, gc_bound *bound, gc_tracker *tracker, void *cmd,
                             const u64 *words, unsigned long long n)
{
    unsigned long long i = 0;
    while (i < n) {
        u64 word = words[i];
        if (word == BARRIER || word == BARRIER_COVERING) {
            if (n - i < 5)
                return i;
            u64 src_stages = words[i + 1], src_access = words[i + 3];
            if (word == BARRIER_COVERING && tracker && src_stages) {
                src_stages |= tracker->stages;
                src_access |= tracker->access;
            }
            record_barrier(fn, tracker, cmd, (u32)src_stages, (u32)words[i + 2], (u32)src_access,
                           (u32)words[i + 4]);
            i += 5;
            continue;
        }
        const gc_dispatch *d = (const gc_dispatch *)(uptr)word;
        const u64 *reads = (const u64 *)(uptr)d->hazard_reads, *writes = (const u64 *)(uptr)d->hazard_writes;
        gc_tracker *t = (d->flags & TRACK_HAZARDS) ? tracker : 0;
        if (d->flags & TRACK_HAZARDS) {
            /* Room first, so running out of memory stops before the dispatch. */
            if (!t || !set_reserve(&t->read, d->hazard_read_count)
                || !set_reserve(&t->written, d->hazard_write_count))
                return i;
            int indirect = d->indirect_buffer != 0;
            if (gc_tracker_needs_barrier(t, reads, d->hazard_read_count, writes, d->hazard_write_count)
                || (indirect && t->narrowed)) {
                record_barrier(fn, t, cmd, (u32)(t->dispatch_stages | t->stages),
                               (u32)(indirect ? t->dst_stages : t->near_stages),
                               (u32)(t->dispatch_access | t->access), (u32)(indirect ? t->dst_access : t->near_access));
                t->hazard_barriers += 1;
            }
        }
        record_dispatch(fn, bound, cmd, d);
        if (t)
            gc_tracker_touch(t, reads, d->hazard_read_count, writes, d->hazard_write_count, t->dispatch_stages,
                             t->dispatch_access);
        i += 1;
    }
    return i;
}
