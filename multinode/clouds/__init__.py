"""One module per cloud in the pure core (no Pulumi, no cloud SDK): what the project knows about a cloud."""
