/* The command interpreter: records a batch of already-planned compute
 * commands into a Vulkan command buffer with one call from Python.
 *
 * Python plans and validates every op; what reaches this file is a stream
 * of 64-bit words naming prebuilt dispatch records (pipeline, layout,
 * descriptors, push constants, workgroup counts) and global memory
 * barriers. Walking it here costs a few nanoseconds per command, against
 * about a third of a microsecond per cffi call from Python.
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
    u32 descriptor_write_count;
    u32 push_size;
    u32 group_x;
    u32 group_y;
    u32 group_z;
    u32 pad;
} gc_dispatch;

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
#define STAGE_COMPUTE 0x20u
#define STRUCTURE_TYPE_MEMORY_BARRIER 46u

/* Stream words: a gc_dispatch address, or BARRIER followed by four words
 * (source stages, destination stages, source access, destination access). */
#define BARRIER 1ull

/* Each field's name, offset and size, in declaration order; the last entry
 * has no name and the struct's size as its offset. The loader refuses a
 * build whose layout differs from FIELDS. */
typedef struct gc_field {
    const char *name;
    u32 offset;
    u32 size;
} gc_field;

#define FIELD(type, name) {#name, (u32)offsetof(type, name), (u32)sizeof(((type *)0)->name)}

static const gc_field dispatch_fields[] = {
    FIELD(gc_dispatch, pipeline), FIELD(gc_dispatch, layout), FIELD(gc_dispatch, descriptors),
    FIELD(gc_dispatch, descriptor_writes), FIELD(gc_dispatch, descriptor_set), FIELD(gc_dispatch, push),
    FIELD(gc_dispatch, indirect_buffer), FIELD(gc_dispatch, indirect_offset),
    FIELD(gc_dispatch, descriptor_write_count), FIELD(gc_dispatch, push_size), FIELD(gc_dispatch, group_x),
    FIELD(gc_dispatch, group_y), FIELD(gc_dispatch, group_z), FIELD(gc_dispatch, pad),
    {0, (u32)sizeof(gc_dispatch), 0},
};

const gc_field *gc_dispatch_fields(void) { return dispatch_fields; }

/* Returns the number of words consumed (n on success). A malformed stream
 * (a barrier cut short) stops early, before the partial command. */
unsigned long long gc_record(const gc_functions *fn, gc_bound *bound, void *cmd,
                             const u64 *words, unsigned long long n)
{
    unsigned long long i = 0;
    while (i < n) {
        u64 word = words[i];
        if (word == BARRIER) {
            if (n - i < 5)
                return i;
            memory_barrier b = {STRUCTURE_TYPE_MEMORY_BARRIER, 0, (u32)words[i + 3], (u32)words[i + 4]};
            fn->barrier(cmd, (u32)words[i + 1], (u32)words[i + 2], 0, 1, &b, 0, 0, 0, 0);
            i += 5;
            continue;
        }
        const gc_dispatch *d = (const gc_dispatch *)(uptr)word;
        if (d->pipeline != bound->pipeline) {
            fn->bind_pipeline(cmd, BIND_POINT_COMPUTE, d->pipeline);
            bound->pipeline = d->pipeline;
        }
        if (d->descriptors != bound->descriptors || d->layout != bound->layout) {
            if (d->descriptor_writes)
                fn->push_descriptors(cmd, BIND_POINT_COMPUTE, d->layout, 0, d->descriptor_write_count,
                                     (const void *)(uptr)d->descriptor_writes);
            else
                fn->bind_sets(cmd, BIND_POINT_COMPUTE, d->layout, 0, 1,
                              (const u64 *)(uptr)d->descriptor_set, 0, 0);
            bound->descriptors = d->descriptors;
            bound->layout = d->layout;
        }
        if (d->push_size)
            fn->push_constants(cmd, d->layout, STAGE_COMPUTE, 0, d->push_size,
                               (const void *)(uptr)d->push);
        if (d->indirect_buffer)
            fn->dispatch_indirect(cmd, d->indirect_buffer, d->indirect_offset);
        else
            fn->dispatch(cmd, d->group_x, d->group_y, d->group_z);
        i += 1;
    }
    return i;
}
