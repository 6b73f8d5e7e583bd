// VkFFT's Vulkan backend on the same GPU: the reference of the `fft`
// benchmark section that goes through the same API and driver as
// guestcompute (vkfft_fft.cu is VkFFT through CUDA).
//
// Built by benchmarks/vkfft_baseline.py with a C++ compiler:
//   c++ -O2 -std=c++17 -DVKFFT_BACKEND=0 -I<folder holding vkFFT.h> -I<glslang's Include folder>
//       vkfft_vulkan.cpp <glslang and SPIRV-Tools static libraries> -lvulkan
// VkFFT generates GLSL at plan time and compiles it with glslang.
//
// Usage: vkfft_vulkan ROUNDS [quick|full] [DEVICE]
// DEVICE picks the first physical device whose name contains it (default:
// the first that is not a CPU). Each case's time is the median over ROUNDS of
// timestamps around 20 VkFFTAppend calls in one command buffer (VkFFT ends
// each append with a barrier, so they run one after another), per transform;
// vkfft_cases.h has the cases, the checks and the JSON printed.
#include "vkFFT.h"
#include "vkfft_cases.h"

namespace {

using cases::Case;
using cases::fail;

bool vk_ok(VkResult r, const char* what) {
    return r == VK_SUCCESS || fail(std::string(what) + ": VkResult " + std::to_string(int(r)));
}

bool vkfft_ok(VkFFTResult r, const char* what) {
    return r == VKFFT_SUCCESS || fail(std::string(what) + ": VkFFT error " + std::to_string(int(r)));
}

const int kCalls = 20;

struct Gpu {
    VkInstance instance = VK_NULL_HANDLE;
    VkPhysicalDevice physical = VK_NULL_HANDLE;
    VkDevice device = VK_NULL_HANDLE;
    VkQueue queue = VK_NULL_HANDLE;
    VkCommandPool pool = VK_NULL_HANDLE;
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    VkQueryPool stamps = VK_NULL_HANDLE;
    VkPhysicalDeviceProperties props = {};
    uint32_t family = 0;

    bool open(const std::string& want);
    void close();
    bool submit();                                       // cmd, already recorded; waits for it
    bool begin();
    uint32_t memory_type(uint32_t bits, VkMemoryPropertyFlags flags) const;
};

struct Buffer {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;

    bool make(const Gpu& gpu, uint64_t bytes, VkBufferUsageFlags usage, VkMemoryPropertyFlags flags);
    void free(const Gpu& gpu) {
        vkDestroyBuffer(gpu.device, buffer, nullptr);
        vkFreeMemory(gpu.device, memory, nullptr);
    }
};

bool Gpu::open(const std::string& want) {
    VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.apiVersion = VK_API_VERSION_1_1;
    VkInstanceCreateInfo info = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    info.pApplicationInfo = &app;
    if (!vk_ok(vkCreateInstance(&info, nullptr, &instance), "vkCreateInstance")) return false;
    uint32_t count = 0;
    vkEnumeratePhysicalDevices(instance, &count, nullptr);
    std::vector<VkPhysicalDevice> all(count);
    vkEnumeratePhysicalDevices(instance, &count, all.data());
    for (VkPhysicalDevice p : all) {
        VkPhysicalDeviceProperties pr;
        vkGetPhysicalDeviceProperties(p, &pr);
        const bool named = want.empty() ? pr.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU
                                        : std::string(pr.deviceName).find(want) != std::string::npos;
        if (named && physical == VK_NULL_HANDLE) physical = p, props = pr;
    }
    if (physical == VK_NULL_HANDLE) return fail("no Vulkan device named '" + want + "'");
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &count, nullptr);
    std::vector<VkQueueFamilyProperties> families(count);
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &count, families.data());
    family = count;
    for (uint32_t i = 0; i < count && family == count; ++i)
        if ((families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && families[i].timestampValidBits) family = i;
    if (family == count) return fail("no compute queue with timestamps");
    const float priority = 1.0f;
    VkDeviceQueueCreateInfo q = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    q.queueFamilyIndex = family;
    q.queueCount = 1;
    q.pQueuePriorities = &priority;
    VkDeviceCreateInfo d = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    d.queueCreateInfoCount = 1;
    d.pQueueCreateInfos = &q;
    if (!vk_ok(vkCreateDevice(physical, &d, nullptr, &device), "vkCreateDevice")) return false;
    vkGetDeviceQueue(device, family, 0, &queue);
    VkCommandPoolCreateInfo p = {VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    p.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    p.queueFamilyIndex = family;
    VkCommandBufferAllocateInfo a = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    a.commandBufferCount = 1;
    a.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    VkFenceCreateInfo f = {VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkQueryPoolCreateInfo s = {VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    s.queryType = VK_QUERY_TYPE_TIMESTAMP;
    s.queryCount = 2;
    return vk_ok(vkCreateCommandPool(device, &p, nullptr, &pool), "vkCreateCommandPool")
           && (a.commandPool = pool, vk_ok(vkAllocateCommandBuffers(device, &a, &cmd), "vkAllocateCommandBuffers"))
           && vk_ok(vkCreateFence(device, &f, nullptr, &fence), "vkCreateFence")
           && vk_ok(vkCreateQueryPool(device, &s, nullptr, &stamps), "vkCreateQueryPool");
}

void Gpu::close() {
    if (device != VK_NULL_HANDLE) {
        vkDeviceWaitIdle(device);
        vkDestroyQueryPool(device, stamps, nullptr);
        vkDestroyFence(device, fence, nullptr);
        vkDestroyCommandPool(device, pool, nullptr);
        vkDestroyDevice(device, nullptr);
    }
    if (instance != VK_NULL_HANDLE) vkDestroyInstance(instance, nullptr);
}

bool Gpu::begin() {
    VkCommandBufferBeginInfo b = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    return vk_ok(vkResetCommandBuffer(cmd, 0), "reset") && vk_ok(vkBeginCommandBuffer(cmd, &b), "begin");
}

bool Gpu::submit() {
    VkSubmitInfo s = {VK_STRUCTURE_TYPE_SUBMIT_INFO};
    s.commandBufferCount = 1;
    s.pCommandBuffers = &cmd;
    return vk_ok(vkQueueSubmit(queue, 1, &s, fence), "vkQueueSubmit")
           && vk_ok(vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences")
           && vk_ok(vkResetFences(device, 1, &fence), "vkResetFences");
}

uint32_t Gpu::memory_type(uint32_t bits, VkMemoryPropertyFlags flags) const {
    VkPhysicalDeviceMemoryProperties mem;
    vkGetPhysicalDeviceMemoryProperties(physical, &mem);
    for (uint32_t i = 0; i < mem.memoryTypeCount; ++i)
        if ((bits & (1u << i)) && (mem.memoryTypes[i].propertyFlags & flags) == flags) return i;
    return UINT32_MAX;
}

bool Buffer::make(const Gpu& gpu, uint64_t bytes, VkBufferUsageFlags usage, VkMemoryPropertyFlags flags) {
    VkBufferCreateInfo b = {VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    b.size = bytes;
    b.usage = usage;
    if (!vk_ok(vkCreateBuffer(gpu.device, &b, nullptr, &buffer), "vkCreateBuffer")) return false;
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(gpu.device, buffer, &req);
    VkMemoryAllocateInfo a = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    a.allocationSize = req.size;
    a.memoryTypeIndex = gpu.memory_type(req.memoryTypeBits, flags);
    return (a.memoryTypeIndex != UINT32_MAX || fail("no memory type"))
           && vk_ok(vkAllocateMemory(gpu.device, &a, nullptr, &memory), "vkAllocateMemory")
           && vk_ok(vkBindBufferMemory(gpu.device, buffer, memory, 0), "vkBindBufferMemory");
}

// Everything before this point in the command buffer, made visible to
// everything after it (the setup copies around the transforms).
void full_barrier(VkCommandBuffer cmd) {
    VkMemoryBarrier m = {VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    m.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT;
    m.dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT;
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &m, 0,
                         nullptr, 0, nullptr);
}

void copy(VkCommandBuffer cmd, VkBuffer from, VkBuffer to, uint64_t bytes) {
    VkBufferCopy region = {0, 0, bytes};
    full_barrier(cmd);
    vkCmdCopyBuffer(cmd, from, to, 1, &region);
    full_barrier(cmd);
}

// The forward transform of ``in`` and the round trip, through ``staging``.
bool round_trip(Gpu& gpu, VkFFTApplication& app, VkFFTLaunchParams& params, Buffer& data, Buffer& staging,
                const Case& c, cases::Measured& m) {
    const uint64_t bytes = cases::bytes(c);
    const std::vector<float> in = cases::input(c);
    std::vector<float> fwd(in.size()), back(in.size());
    void* mapped = nullptr;
    if (!vk_ok(vkMapMemory(gpu.device, staging.memory, 0, bytes, 0, &mapped), "vkMapMemory")) return false;
    memcpy(mapped, in.data(), bytes);
    bool ok = gpu.begin();
    copy(gpu.cmd, staging.buffer, data.buffer, bytes);
    ok = ok && vkfft_ok(VkFFTAppend(&app, -1, &params), "forward");
    copy(gpu.cmd, data.buffer, staging.buffer, bytes);
    ok = ok && vk_ok(vkEndCommandBuffer(gpu.cmd), "end") && gpu.submit();
    if (ok) memcpy(fwd.data(), mapped, bytes);
    ok = ok && gpu.begin() && vkfft_ok(VkFFTAppend(&app, 1, &params), "inverse");
    copy(gpu.cmd, data.buffer, staging.buffer, bytes);
    ok = ok && vk_ok(vkEndCommandBuffer(gpu.cmd), "end") && gpu.submit();
    if (ok) memcpy(back.data(), mapped, bytes);
    vkUnmapMemory(gpu.device, staging.memory);
    return ok && cases::check(c, in, fwd, back, m);
}

double time_transform(Gpu& gpu, VkFFTApplication& app, VkFFTLaunchParams& params, int direction, int rounds) {
    bool ok = gpu.begin();
    vkCmdResetQueryPool(gpu.cmd, gpu.stamps, 0, 2);
    vkCmdWriteTimestamp(gpu.cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, gpu.stamps, 0);
    for (int i = 0; i < kCalls && ok; ++i) ok = vkfft_ok(VkFFTAppend(&app, direction, &params), "append");
    vkCmdWriteTimestamp(gpu.cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, gpu.stamps, 1);
    ok = ok && vk_ok(vkEndCommandBuffer(gpu.cmd), "end");
    std::vector<double> per_call;
    double warm_ns = 0;
    // Bring the clocks up with the transform itself (300 ms of GPU time) before timing it.
    for (int r = -1; ok && r < rounds; r += warm_ns >= 3e8 ? 1 : 0) {
        uint64_t t[2];
        ok = gpu.submit() && vk_ok(vkGetQueryPoolResults(gpu.device, gpu.stamps, 0, 2, sizeof t, t, sizeof t[0],
                                                         VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
                                   "vkGetQueryPoolResults");
        const double ns = double(t[1] - t[0]) * gpu.props.limits.timestampPeriod;
        if (warm_ns < 3e8) warm_ns += ns;
        else if (r >= 0) per_call.push_back(ns / 1e3 / kCalls);
    }
    return ok ? cases::median(per_call) : 0;
}

bool run_case(Gpu& gpu, const Case& c, int rounds, cases::Measured& m) {
    uint64_t bytes = cases::bytes(c);
    Buffer data, staging;
    const VkBufferUsageFlags usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                                     | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    bool ok = data.make(gpu, bytes, usage, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)
              && staging.make(gpu, bytes, usage, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
                                                 | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
    VkFFTConfiguration config = VKFFT_ZERO_INIT;
    cases::describe(config, c);
    config.physicalDevice = &gpu.physical;
    config.device = &gpu.device;
    config.queue = &gpu.queue;
    config.commandPool = &gpu.pool;
    config.fence = &gpu.fence;
    config.buffer = &data.buffer;
    config.bufferSize = &bytes;
    VkFFTApplication app = VKFFT_ZERO_INIT;
    VkFFTLaunchParams params = VKFFT_ZERO_INIT;
    params.commandBuffer = &gpu.cmd;
    params.buffer = &data.buffer;
    const bool planned = ok && vkfft_ok(initializeVkFFT(&app, config), c.name);
    ok = planned && round_trip(gpu, app, params, data, staging, c, m);
    if (ok) m.us = time_transform(gpu, app, params, c.direction, rounds);
    vkDeviceWaitIdle(gpu.device);
    if (planned) deleteVkFFT(&app);
    data.free(gpu);
    staging.free(gpu);
    return ok && m.us > 0;
}

}  // namespace

int main(int argc, char** argv) {
    const int rounds = argc > 1 ? std::max(1, atoi(argv[1])) : 10;
    const bool quick = argc > 2 && std::string(argv[2]) == "quick";
    Gpu gpu;
    const bool ok = gpu.open(argc > 3 ? argv[3] : "");
    const auto done = cases::run_all(quick, ok, [&](const Case& c, cases::Measured& m) {
        return run_case(gpu, c, rounds, m);
    });
    cases::print_json("vulkan", gpu.props.deviceName, VkFFTGetVersion(), rounds, done);
    gpu.close();
    return cases::errors().empty() ? 0 : 1;
}
