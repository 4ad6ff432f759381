/*
 * <mpi.h> for nxr's MPI example and test: Debian's OpenMPI headers
 * (libopenmpi-dev), reached through the MPI alternatives link
 * /usr/include/<multiarch>/mpi, which is what `mpicc --showme:compile` adds
 * with -I. One wrapper so that no source hard-codes an include path and no
 * rule needs a copt: //third_party:mpi puts this directory first.
 */
#include <mpi/mpi.h>
