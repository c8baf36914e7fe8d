#[allow(unused_mut)]
fn update<A: Act>(mut self: &mut Self, mut grads: &[Tensor], mut lr: f64) {
    let mut scale = |g: &Tensor| A::default().apply(g) * lr;
    #[allow(non_snake_case)]
    let __janus_v_janus_tail;
    #[allow(
        unused_mut,
        unused_variables,
        unused_assignments,
        unused_imports,
        unreachable_code,
        non_snake_case,
        clippy::all
    )]
    {
        use ::janus::rt::{
            FixedMutRef as _, FixedOther as _, InOutModule as _, InOutOpaque as _,
            InOutRef as _, OutputModule as _, OutputModuleRef as _, OutputOpaque as _,
            ProbeKeyed as _, ProbeOpaque as _,
        };
        static __JANUS_FRAGMENT: ::janus::rt::Fragment = ::janus::rt::Fragment::new(::janus::rt::Site {
            function: "update",
            file: ::core::file!(),
            line: ::core::line!(),
            index: 1u32,
            profile: 2u32,
            max_variants: 8u32,
            min_ops: 3u32,
        });
        let __janus_dyn_lr = ::janus::rt::dynamic_scalar(lr);
        let __janus_w_janus_tail = ::janus::rt::Witness::new();
        match __JANUS_FRAGMENT
            .enter(
                || {
                    ::std::vec![
                        (& ::janus::rt::Probe(& __janus_dyn_lr)).probe("lr"), (&
                        ::janus::rt::Probe(& self.params)).probe("self.params"), (&
                        ::janus::rt::Probe(& grads)).probe("grads")
                    ]
                },
                &[::std::any::type_name::<A>(), ::std::any::type_name::<Self>()],
            )
        {
            ::janus::rt::Enter::Body(__janus_scope) => {
                let (__janus_o_janus_tail,) = {
                    let lr = &__janus_dyn_lr;
                    let mut scale = |g: &Tensor| A::default().apply(g) * lr;
                    let __janus_tail = for (w, g) in self.params.iter_mut().zip(grads) {
                        #[allow(
                            unused_mut,
                            unused_variables,
                            unused_assignments,
                            unused_imports,
                            unreachable_code,
                            non_snake_case,
                            clippy::all
                        )]
                        {
                            use ::janus::rt::{
                                FixedMutRef as _, FixedOther as _, InOutModule as _,
                                InOutOpaque as _, InOutRef as _, OutputModule as _,
                                OutputModuleRef as _, OutputOpaque as _, ProbeKeyed as _,
                                ProbeOpaque as _,
                            };
                            static __JANUS_FRAGMENT: ::janus::rt::Fragment = ::janus::rt::Fragment::new(::janus::rt::Site {
                                function: "update",
                                file: ::core::file!(),
                                line: ::core::line!(),
                                index: 0u32,
                                profile: 2u32,
                                max_variants: 8u32,
                                min_ops: 3u32,
                            });
                            let __janus_dyn_lr = ::janus::rt::dynamic_scalar(lr);
                            match __JANUS_FRAGMENT
                                .enter(
                                    || {
                                        ::std::vec![
                                            (& ::janus::rt::Probe(& __janus_dyn_lr)).probe("lr"), (&
                                            ::janus::rt::Probe(& * w)).probe("*w"), (&
                                            ::janus::rt::Probe(& g)).probe("g")
                                        ]
                                    },
                                    &[
                                        ::std::any::type_name::<A>(),
                                        ::std::any::type_name::<Self>(),
                                    ],
                                )
                            {
                                ::janus::rt::Enter::Body(__janus_scope) => {
                                    let () = {
                                        let lr = &__janus_dyn_lr;
                                        let mut scale = |g: &Tensor| A::default().apply(g) * lr;
                                        *w = &*w - scale(g);
                                        ()
                                    };
                                    __janus_scope
                                        .exit(
                                            ::std::vec![
                                                (&& & ::janus::rt::Witness::of(& * w)).output(& * w, "*w"),
                                                (&& ::janus::rt::Witness::of(& g)).fixed_output(& g, "g")
                                            ],
                                        );
                                }
                                ::janus::rt::Enter::Replay(mut __janus_out) => {
                                    (&&&::janus::rt::Witness::of(&*w))
                                        .restore(&mut *w, &mut __janus_out);
                                }
                            }
                        }
                    };
                    __janus_w_janus_tail.bind(&__janus_tail);
                    (__janus_tail,)
                };
                __janus_scope
                    .exit(
                        ::std::vec![
                            (&& & __janus_w_janus_tail).output(& __janus_o_janus_tail,
                            "return value")
                        ],
                    );
                __janus_v_janus_tail = __janus_o_janus_tail;
            }
            ::janus::rt::Enter::Replay(mut __janus_out) => {
                __janus_v_janus_tail = (&&&__janus_w_janus_tail).take(&mut __janus_out);
            }
        }
    }
    #[allow(unused_variables, non_snake_case)]
    let mut __janus_tail = __janus_v_janus_tail;
    __janus_tail
}
