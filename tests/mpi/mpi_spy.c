/*
 * The MPI test's witness: an MPI_Allreduce linked into the test build of
 * examples/mpi_ranks ahead of libmpi's, through MPI's own profiling
 * interface (every MPI function has a PMPI_ twin). It prints what the
 * program handed MPI -- send buffer, receive buffer, count -- and forwards
 * the call unchanged, so tools/mpi_test.sh checks the pointer MPI really got
 * against the pool buffer the program reports, instead of taking the
 * program's word for it.
 */
#include <mpi.h>
#include <stdio.h>

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm)
{
    int rank = -1;
    PMPI_Comm_rank(comm, &rank);
    if (sendbuf == MPI_IN_PLACE)
        fprintf(stderr, "mpi_spy: rank %d MPI_Allreduce sendbuf MPI_IN_PLACE recvbuf %p count %d\n",
                rank, recvbuf, count);
    else
        fprintf(stderr, "mpi_spy: rank %d MPI_Allreduce sendbuf %p recvbuf %p count %d\n", rank,
                sendbuf, recvbuf, count);
    return PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
}
