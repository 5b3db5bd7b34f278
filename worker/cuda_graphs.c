/* Decode steps as CUDA graphs: per bucket of rows and in-flight slot, the
 * whole step and the forward alone (its sampling queued eagerly after it),
 * each captured once and replayed. */

#include "cuda_internal.h"

/* Replays a decode graph of one bucket for in-flight slot `slot` (cb->d_meta
 * is that slot's buffer): the bucket's first call runs the whole step eagerly
 * and the first call of each graph after that captures it
 * (capture_decode_graphs makes these calls for every bucket at start-up). */
int cuda_run_decode_graph(struct cuda_backend *cb, int bucket, int slot, bool forward_only,
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
        *g = (struct graph_entry){.bucket = bucket};
        cb->defer_sample = forward_only;
        int rc = cuda_forward(cb, l, bucket, bucket, bucket, -1, err, errlen);
        cb->defer_sample = false;
        return rc;
    }
    const int f = forward_only ? 1 : 0;
    if (!g->captured[f][slot]) {
        cudaGraph_t graph;
        CUDA_CHECK(cudaStreamBeginCapture(cb->stream, cudaStreamCaptureModeThreadLocal));
        cb->defer_sample = forward_only;
        int rc = cuda_forward(cb, l, bucket, bucket, bucket, -1, err, errlen);
        cb->defer_sample = false;
        cudaError_t e = cudaStreamEndCapture(cb->stream, &graph);
        if (rc != 0)
            return -1;
        if (e != cudaSuccess) {
            snprintf(err, errlen, "cuda backend: capturing the decode graph of batch %d: %s",
                     bucket, cudaGetErrorString(e));
            return -1;
        }
        e = cudaGraphInstantiate(&g->exec[f][slot], graph, 0);
        cudaGraphDestroy(graph);
        CUDA_CHECK(e);
        g->captured[f][slot] = true;
    }
    CUDA_CHECK(cudaGraphLaunch(g->exec[f][slot], cb->stream));
    return 0;
}
