/* Where a process ran, as its snapshot says: the host, each device's UUID and PCI bus id (the
 * stand-in's are a function of the host name and the ordinal, see tests/standin/driver.c), the
 * launcher, CUDA_VISIBLE_DEVICES, and the command line with secret-looking values masked.
 * meson.build runs it with the arguments and environment the expectations below answer. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <unistd.h>

#include "check.h"

static void expect_uuid(int dev)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    uint32_t h = 2166136261u;
    for (const char *p = host; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    printf("EXPECT device %d uuid GPU-7374616e-642d-696e-2d67-7075%02x%02x%02x%02x\n", dev,
           h & 0xff, (h >> 8) & 0xff, (h >> 16) & 0xff, dev);
    printf("EXPECT device %d pci_bus_id 0000:%02x:00.0\n", dev, dev + 1);
}

int main(void)
{
    void *a, *b;
    CHECK_EQ_INT(cudaMalloc(&a, 1 << 20), cudaSuccess);
    CHECK_EQ_INT(cudaSetDevice(1), cudaSuccess);
    CHECK_EQ_INT(cudaMalloc(&b, 2 << 20), cudaSuccess);
    expect_uuid(0);
    expect_uuid(1);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    printf("EXPECT json host.name \"%s\"\n", host);
    /* the command line meson.build gives */
    static const char *const command[] = {
        "--hf-token",   "***",       "--epochs", "3",        "--API_KEY=***", "trainer.secret=***",
        "--keep-going", "--dataset", "shards",   "--no-key", "--lr",          "0.1",
        "password",
    };
    for (size_t i = 0; i < sizeof command / sizeof command[0]; i++)
        printf("EXPECT json command.%zu \"%s\"\n", i + 1, command[i]);
    printf("EXPECT json command.length %zu\n", sizeof command / sizeof command[0] + 1);
    printf("EXPECT json rank {\"rank\": 3, \"local_rank\": 1, \"source\": \"RANK\"}\n");
    printf("EXPECT json launcher {\"name\": \"torchrun\", \"job_id\": \"run42\", "
           "\"world_size\": 8, \"local_rank\": 1, \"slurm_job_id\": \"777\"}\n");
    printf("EXPECT json visible_devices [\"3\", \"GPU-5c0a\"]\n");
    return CHECK_DONE();
}
