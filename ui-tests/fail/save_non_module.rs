fn main() {
    let names = vec![String::from("w")];
    janus::save("names.safetensors", &names).unwrap();
}
