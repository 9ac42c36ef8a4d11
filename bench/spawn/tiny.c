/* The app the spawn benchmark starts: it does nothing, so the benchmark
 * measures starting and stopping, not the app. Linked statically so the
 * dynamic loader's work does not hide the layer's cost. */
int main(void)
{
    return 0;
}
