"""What a build is and what proves it: the configuration, the compiler and its flags, the work directory,
the profile's data, the objects' own records, and the contract between the phases."""
