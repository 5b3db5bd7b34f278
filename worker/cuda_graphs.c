/* Decode steps as CUDA graphs: one per bucket of rows and in-flight slot,
 * each run eagerly once, then captured and replayed. */

#include "cuda_internal.h"

/* Replays the decode graph of one bucket for in-flight slot `slot` (cb->d_meta
 * is that slot's buffer): the bucket's first call runs the step eagerly, the
 * first call of each slot after that captures it (capture_decode_graphs makes
 * these calls for every bucket at start-up). */
int cuda_run_decode_graph(struct cuda_backend *cb, int bucket, int slot,
                          const struct step_layout *l, char *err, size_t errlen)
{
    struct graph_entry *g = NULL;
    for (int i = 0; i < cb->num_graphs; i++)
        if (cb->graphs[i].bucket == bucket)
            g = &cb->graphs[i];
    if (!g) {
        if (cb->num_graphs == NUM_GRAPH_BUCKETS) {
            snprintf(err, errlen, "cuda backend: too many graph buckets");
            return -1;
        }
        /* The first step of a bucket runs eagerly with the same padded shapes:
         * modules load, cuBLASLt picks its algorithms, and nothing of that
         * happens inside the capture. */
        g = &cb->graphs[cb->num_graphs++];
        g->bucket = bucket;
        for (int i = 0; i < MAX_INFLIGHT; i++)
            g->captured[i] = false;
        return cuda_forward(cb, l, bucket, bucket, bucket, -1, err, errlen);
    }
    if (!g->captured[slot]) {
        cudaGraph_t graph;
        CUDA_CHECK(cudaStreamBeginCapture(cb->stream, cudaStreamCaptureModeThreadLocal));
        int rc = cuda_forward(cb, l, bucket, bucket, bucket, -1, err, errlen);
        cudaError_t e = cudaStreamEndCapture(cb->stream, &graph);
        if (rc != 0)
            return -1;
        if (e != cudaSuccess) {
            snprintf(err, errlen, "cuda backend: capturing the decode graph of batch %d: %s",
                     bucket, cudaGetErrorString(e));
            return -1;
        }
        e = cudaGraphInstantiate(&g->exec[slot], graph, 0);
        cudaGraphDestroy(graph);
        CUDA_CHECK(e);
        g->captured[slot] = true;
    }
    CUDA_CHECK(cudaGraphLaunch(g->exec[slot], cb->stream));
    return 0;
}
