"""voxline's wire layer: typed events, the sans-I/O protocol core, transports and the local server."""
