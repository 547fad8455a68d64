// Which of n points lie inside one polygon: the even-odd rule (a point is inside when a ray from it
// crosses the polygon's edges an odd number of times). One thread per point; each block stages the
// vertices through shared memory a tile at a time, so a polygon of any size is read once per block.
namespace geo {

template <typename T>
__global__ void __launch_bounds__(256) point_in_polygon(const T* __restrict__ px, const T* __restrict__ py, int n,
                                                        const T* __restrict__ vx, const T* __restrict__ vy,
                                                        int vertices, unsigned char* __restrict__ inside) {
  constexpr int tile = 256;
  __shared__ T sx[tile + 1], sy[tile + 1];  // a tile's vertices and the first vertex of the next one
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const T x = i < n ? px[i] : T(0), y = i < n ? py[i] : T(0);
  bool in = false;
  for (int base = 0; base < vertices; base += tile) {
    const int edges = vertices - base < tile ? vertices - base : tile;
    __syncthreads();
    for (int j = threadIdx.x; j <= edges; j += blockDim.x) {
      const int v = base + j == vertices ? 0 : base + j;  // the last edge closes the polygon
      sx[j] = vx[v];
      sy[j] = vy[v];
    }
    __syncthreads();
    for (int j = 0; j < edges; ++j) {
      const T x0 = sx[j], y0 = sy[j], x1 = sx[j + 1], y1 = sy[j + 1];
      if ((y0 > y) != (y1 > y) && x < (x1 - x0) * (y - y0) / (y1 - y0) + x0) in = !in;
    }
  }
  if (i < n) inside[i] = in;
}

}  // namespace geo
