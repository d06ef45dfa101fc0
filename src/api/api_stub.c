/* Public entry points that Tutti does not implement yet. Each one exists so that every symbol of
 * NCCL's API links, and each fails loudly: it returns ncclInvalidUsage with the message
 * "<name> is not implemented yet in Tutti" (logged at WARN and kept as the thread's last error).
 * None of them touches its arguments, so nothing silently succeeds or half-happens. */
#include "api/api.h"

TT_API ncclResult_t pncclMemAlloc(void **ptr, size_t size)
{
    return tt_api_not_implemented("ncclMemAlloc");
}
TT_API_ALIAS(ncclMemAlloc);

TT_API ncclResult_t pncclMemFree(void *ptr) { return tt_api_not_implemented("ncclMemFree"); }
TT_API_ALIAS(ncclMemFree);

TT_API ncclResult_t pncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank,
                                              int nId, ncclUniqueId *commIds,
                                              ncclConfig_t *config)
{
    return tt_api_not_implemented("ncclCommInitRankScalable");
}
TT_API_ALIAS(ncclCommInitRankScalable);

TT_API ncclResult_t pncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    return tt_api_not_implemented("ncclCommInitAll");
}
TT_API_ALIAS(ncclCommInitAll);

TT_API ncclResult_t pncclCommFinalize(ncclComm_t comm)
{
    return tt_api_not_implemented("ncclCommFinalize");
}
TT_API_ALIAS(ncclCommFinalize);

TT_API ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
    return tt_api_not_implemented("ncclCommRevoke");
}
TT_API_ALIAS(ncclCommRevoke);

TT_API ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                   ncclConfig_t *config)
{
    return tt_api_not_implemented("ncclCommSplit");
}
TT_API_ALIAS(ncclCommSplit);

TT_API ncclResult_t pncclCommShrink(ncclComm_t comm, int *excludeRanksList,
                                    int excludeRanksCount, ncclComm_t *newcomm,
                                    ncclConfig_t *config, int shrinkFlags)
{
    return tt_api_not_implemented("ncclCommShrink");
}
TT_API_ALIAS(ncclCommShrink);

TT_API ncclResult_t pncclCommRegister(const ncclComm_t comm, void *buff, size_t size,
                                      void **handle)
{
    return tt_api_not_implemented("ncclCommRegister");
}
TT_API_ALIAS(ncclCommRegister);

TT_API ncclResult_t pncclCommDeregister(const ncclComm_t comm, void *handle)
{
    return tt_api_not_implemented("ncclCommDeregister");
}
TT_API_ALIAS(ncclCommDeregister);

TT_API ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size,
                                            ncclWindow_t *win, int winFlags)
{
    return tt_api_not_implemented("ncclCommWindowRegister");
}
TT_API_ALIAS(ncclCommWindowRegister);

TT_API ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    return tt_api_not_implemented("ncclCommWindowDeregister");
}
TT_API_ALIAS(ncclCommWindowDeregister);

TT_API ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar,
                                              ncclDataType_t datatype,
                                              ncclScalarResidence_t residence, ncclComm_t comm)
{
    return tt_api_not_implemented("ncclRedOpCreatePreMulSum");
}
TT_API_ALIAS(ncclRedOpCreatePreMulSum);

TT_API ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    return tt_api_not_implemented("ncclRedOpDestroy");
}
TT_API_ALIAS(ncclRedOpDestroy);

TT_API ncclResult_t pncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return tt_api_not_implemented("ncclAlltoAll");
}
TT_API_ALIAS(ncclAlltoAll);

TT_API ncclResult_t pncclGather(const void *sendbuff, void *recvbuff, size_t count,
                                ncclDataType_t datatype, int root, ncclComm_t comm,
                                cudaStream_t stream)
{
    return tt_api_not_implemented("ncclGather");
}
TT_API_ALIAS(ncclGather);

TT_API ncclResult_t pncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                                 ncclDataType_t datatype, int root, ncclComm_t comm,
                                 cudaStream_t stream)
{
    return tt_api_not_implemented("ncclScatter");
}
TT_API_ALIAS(ncclScatter);

TT_API ncclResult_t pncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype,
                              int peer, ncclComm_t comm, cudaStream_t stream)
{
    return tt_api_not_implemented("ncclSend");
}
TT_API_ALIAS(ncclSend);

TT_API ncclResult_t pncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                              ncclComm_t comm, cudaStream_t stream)
{
    return tt_api_not_implemented("ncclRecv");
}
TT_API_ALIAS(ncclRecv);

TT_API ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
    return tt_api_not_implemented("ncclGroupSimulateEnd");
}
TT_API_ALIAS(ncclGroupSimulateEnd);
